// Pipeline schedules as data: GPipe, 1F1B and interleaved 1F1B as pure functions of
// (pipeline size p, virtual stages v, micro-batches m, pp rank) that return a rank's action list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lattice {

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved };

// "gpipe", "1f1b", "interleaved" (the values of parallel.schedule).
const char* schedule_kind_name(ScheduleKind kind);
// Inverse of schedule_kind_name; an unknown name is an InputError naming parallel.schedule and
// listing the valid values.
ScheduleKind parse_schedule_kind(const std::string& name);

enum class ActionType {
  kForward,         // forward of (microbatch, chunk)
  kBackward,        // backward of (microbatch, chunk)
  kSendActivation,  // output of forward(microbatch, chunk) to the next virtual stage, on `peer`
  kRecvActivation,  // input of forward(microbatch, chunk) from the previous virtual stage, on `peer`
  kSendGrad,        // input gradient of backward(microbatch, chunk) to the previous virtual stage
  kRecvGrad,        // output gradient for backward(microbatch, chunk) from the next virtual stage
};
const char* action_type_name(ActionType type);  // "Forward", "RecvGrad", ...
bool is_compute(ActionType type);
bool is_send(ActionType type);
bool is_recv(ActionType type);
bool is_grad_transfer(ActionType type);  // SendGrad, RecvGrad

// One step of a rank's schedule. `chunk` is always the model chunk on THIS rank (0..v-1), also
// for sends and receives (the chunk whose activation/gradient is sent or received). `peer` is the
// pp rank on the other side of a send/receive (it equals this rank only when p == 1 and v > 1:
// the executor then hands the tensor over locally), -1 for Forward/Backward.
struct Action {
  ActionType type = ActionType::kForward;
  int microbatch = 0;
  int chunk = 0;
  int peer = -1;
  bool operator==(const Action&) const = default;
};
std::string to_string(const Action& a);  // e.g. "RecvActivation(mb=3, chunk=1, peer=2)"

// Megatron's layout: chunk c of pp rank r holds the layers of virtual stage c·p + r, so
// activations flow r -> r+1 within a chunk and from rank p-1's chunk c to rank 0's chunk c+1.
inline int virtual_stage(int p, int pp_rank, int chunk) { return chunk * p + pp_rank; }

// Checks (kind, p, v, m); every problem is an InputError naming the field to change:
// parallel.pipeline >= 1, parallel.virtual_stages >= 1 (and == 1 unless the schedule is
// interleaved), micro-batches >= 1 (= training.global_batch_size / (training.micro_batch_size ·
// parallel.data)), and for interleaved a micro-batch count that is a multiple of parallel.pipeline.
void validate_schedule(ScheduleKind kind, int p, int v, int m);

// The action list of pp rank `pp_rank` (validates first; a rank outside [0, p) is an internal
// error). Receives sit immediately before the Forward/Backward that consumes them and sends right
// after the compute that produced them; an executor posts sends asynchronously (they never block)
// and may post receives earlier than listed. Orders (Megatron-LM's):
//   gpipe:       all m forwards, then all m backwards (micro-batch order 0..m-1 both times).
//   1f1b:        min(p - r - 1, m) warm-up forwards, then (forward, backward) pairs, then the
//                remaining backwards.
//   interleaved: the k-th forward runs chunk (k / p) % v on micro-batch (k / (p·v))·p + k % p, the
//                k-th backward the same micro-batch on chunk v - 1 - (k / p) % v; warm-up
//                (p - r - 1)·2 + (v - 1)·p forwards (all m·v when m == p), capped at m·v, then
//                (forward, backward) pairs, then the remaining backwards. v == 1 is allowed.
std::vector<Action> make_schedule(ScheduleKind kind, int p, int v, int m, int pp_rank);
// make_schedule for every rank 0..p-1.
std::vector<std::vector<Action>> make_all_schedules(ScheduleKind kind, int p, int v, int m);

// Forward passes only (evaluation): pp rank `pp_rank` runs, for each micro-batch 0..m-1 and each of
// its chunks 0..v-1 in that order, RecvActivation (not on virtual stage 0), Forward, SendActivation
// (not on the last virtual stage). Every rank follows the global (micro-batch, virtual stage) order,
// so with non-blocking sends it cannot deadlock. Any m >= 1 (no schedule constraint).
std::vector<Action> make_forward_only_schedule(int p, int v, int m, int pp_rank);

// Idle share of p·makespan in the textbook model (per-stage forward/backward costs t_f and t_b,
// a chunk costs t/v, free communication): (p-1)/(m+p-1) for gpipe and 1f1b, (p-1)/(v·m+p-1)
// for interleaved.
double theoretical_bubble(ScheduleKind kind, int p, int v, int m);

// Most (micro-batch, chunk) pairs that pp rank `pp_rank` holds activations for at once
// (forwarded, not yet backwarded, summed over chunks): gpipe m; 1f1b min(p - r, m) <= p;
// interleaved min(warm-up + 1, m·v) with the warm-up above (m·v when m == p). A chunk holds 1/v
// of a stage's layers, so in whole-stage activations the interleaved figure is this / v.
int64_t max_inflight_bound(ScheduleKind kind, int p, int v, int m, int pp_rank);

}  // namespace lattice
