// The pipeline executor: runs one pp rank's action list (parallel/schedule.h: gpipe, 1f1b,
// interleaved) over its model chunks with asynchronous point-to-point transfers.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/device_time_sum.h"
#include "kernels/nvtx_range.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_lanes.h"
#include "parallel/pipeline_stage.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"

namespace lattice {

// What one step (one action list) cost this rank, in seconds between events recorded on the
// executor's stream: on a GPU the device's execution, not the host's launch.
struct PipelineStepStats {
  double step_s = 0;       // from the first action until every send has completed
  double forward_s = 0;    // inside PipelineStage::forward
  double backward_s = 0;   // inside PipelineStage::backward
  double recv_wait_s = 0;  // blocked waiting for a receive the next compute needs
  double send_wait_s = 0;  // blocked waiting for sends (buffer reuse, end of step)
  int forwards = 0;
  int backwards = 0;
  int64_t buffers = 0;            // activation buffers in the executor's pool after the step
  int64_t buffers_allocated = 0;  // of which allocated during this step (0 in steady state)

  double compute_s() const { return forward_s + backward_s; }
  // This rank's idle share of the step: 1 - compute / step.
  double idle_fraction() const { return step_s > 0 ? 1.0 - compute_s() / step_s : 0.0; }
};

// A run's statistics as recorded: the counts, and the device intervals, read by stats() once the
// step's work has completed (after the step's read-back), so that running a step adds no host
// synchronization (on a GPU each read of an event's time waits for it).
class PipelineStepTiming {
 public:
  PipelineStepStats stats() const;

 private:
  friend class PipelineExecutor;
  PipelineStepStats counts;  // forwards, backwards, buffers; the seconds filled by stats()
  DeviceTimeSum forward, backward, recv_wait, send_wait;
  Event start, end;
};

// The measured pipeline bubble over the pp group: 1 - sum(compute) / (p · max(step)), the same
// definition as the simulator's bubble_fraction, to print next to theoretical_bubble(). A
// collective on `pp_group`'s host channel (every pp rank calls it, after its step).
double measured_bubble(const PipelineStepStats& stats, Communicator& pp_group);

// Keeps a pool of activation-shaped buffers across steps (no tensor is allocated in a step once
// the pool has reached its working size: the first step, or reserve()).
//
// Transfers: a receive is posted into a pool buffer when its action is reached, or earlier: at
// each Forward/Backward the receives that the NEXT compute needs are posted before the compute
// runs, so that they overlap it; the consuming compute waits on the handle. A send is posted
// (send_async) right after its compute and its buffer goes back to the pool once the send has
// completed (polled whenever a buffer is needed, waited at the end of the step). Nothing blocks on
// a send before the end of the step: a pool with no free buffer grows instead, so the schedules
// that the simulator proves deadlock-free with non-blocking sends cannot deadlock here.
// Tags: ((microbatch · v + receiving chunk) · 2 + {0 activation, 1 gradient}): unique per
// (type, micro-batch, receiving virtual stage) between a pair of ranks; must be < 32768 (MPI's
// guaranteed tag bound), i.e. m · v < 16384.
// Ordered point-to-point (the pp group's ordered_p2p(): NCCL, or `ordered_p2p` given): no tags
// (0), and each transfer goes on its lane's own group (PipelineLanes); computes and transfers run
// in p2p_host_order — a send right after its compute, a receive one compute before the one
// consuming it — the very order check_ordered_p2p proves matches and cannot deadlock.
// p == 1 with v > 1: the peer is this rank; the buffer is handed to the receiving chunk without
// MPI or a copy.
// A compute waits for its receive on the stream (handle.wait_on: ordering only); the sends at the end
// of the step are host waits, as their buffers go back to the pool.
// Trace: "forward"/"backward" on the compute lane (args step, microbatch, chunk), and each wait for a
// receive ("recv_activation"/"recv_grad") on the communication lane, timed by events on the
// stream; each host wait for a send ("send_wait") on the communication lane.
class PipelineExecutor {
 public:
  // `ctx`: the device the chunks compute on; its stream is where their work is enqueued (the one
  // the receives order and the events time) and the pool's buffers come from it. It must outlive this.
  // `ordered_p2p`: issue transfers as on an ordered transport even when the group is not one (tests
  // prove the order on MPI, where a wrong order mismatches tensors instead of hanging). Collective
  // over the pp group when ordered and p >= 2 (it splits the lanes' groups).
  PipelineExecutor(Communicator& pp_group, Tracer& tracer, const DeviceContext& ctx, bool ordered_p2p = false);
  ~PipelineExecutor();

  // Runs `actions` (this pp rank's list; make_schedule(kind, p, v, m, pp_group.rank())) with
  // chunks[c] as model chunk c (v = chunks.size(), virtual stage c·p + rank). Checks that the list
  // is consistent: peers as the layout implies (before any action runs), every produced
  // activation/gradient sent, every received one consumed. On return every transfer of this rank
  // has completed; its times are read from the returned timing (stats()) when the caller is ready to wait.
  PipelineStepTiming run(const std::vector<Action>& actions, const std::vector<PipelineStage*>& chunks);

  // Grows the pool to at least `buffers` of this shape now (e.g. before the first timed step).
  void reserve(int64_t buffers, const Shape& shape, DType dtype = DType::kF32);
  int64_t pool_size() const { return static_cast<int64_t>(pool_.size()); }

  // The "step" arg of the forward/backward trace events of the following runs (-1 = none given),
  // and the anchor that places their spans: the caller's step span's, so that on a GPU, where the
  // host runs ahead of the device, every span of a step is placed from one anchor and nests in the
  // step by device time (a second anchor would put its host launch time in place of the device's).
  // Without one (never recorded), each run anchors at its start.
  void set_trace_step(int64_t step, TraceAnchor anchor = {}) {
    trace_step_ = step;
    trace_anchor_ = std::move(anchor);
  }

 private:
  struct Slot {
    Tensor tensor;
    CommHandle send;  // pending while a send from this buffer is in flight
    bool in_use = false;
  };
  struct Held;
  struct Step;
  int acquire(int64_t& allocated);
  void release(int slot);
  Tensor buffer(int slot) const;  // undefined for -1 (no input / output)

  // One method per action kind, and what they share.
  Step begin_step(const std::vector<Action>& actions, const std::vector<PipelineStage*>& chunks);
  void post_recv(Step& s, const Action& a, bool for_action);
  void send(Step& s, const Action& a);
  void forward(Step& s, size_t i);
  void backward(Step& s, size_t i);
  void end_step(Step& s);
  void check_action(const Step& s, const Action& a) const;
  // The peer virtual stage a send/receive must name, from the layout.
  int expected_peer(const Step& s, const Action& a) const;
  int tag_for(const Step& s, bool grad, int microbatch, int receiving_chunk) const;
  // Posts the receives that the compute after actions[i] needs, so that they overlap this compute.
  void post_lookahead(Step& s, size_t i);
  // The received input of a compute (the stream waits for it); its pool slot.
  int take_input(Step& s, ActionType recv_kind, const Action& a);
  void end_compute(Step& s, const Action& a, int in, int out, ActionType out_kind);
  // Runs `work` inside an NVTX range; adds its interval between events on the stream to `sum`, and
  // traces it as a span.
  template <class Work>
  void timed(const Step& s, DeviceTimeSum& sum, const char* name, const char* category, NvtxKind kind, TraceArgs args,
             Work&& work);

  Communicator& pp_;
  std::unique_ptr<PipelineLanes> lanes_;  // ordered point-to-point with p >= 2
  Tracer& tracer_;
  const DeviceContext& ctx_;
  Shape shape_;
  DType dtype_ = DType::kF32;
  std::vector<Slot> pool_;
  int64_t trace_step_ = -1;
  TraceAnchor trace_anchor_;
};

}  // namespace lattice
