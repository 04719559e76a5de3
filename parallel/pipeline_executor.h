// The pipeline executor: runs one pp rank's action list (parallel/schedule.h: gpipe, 1f1b,
// interleaved) over its model chunks with asynchronous point-to-point transfers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_stage.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"

namespace lattice {

// What one step (one action list) cost this rank, in seconds of steady_clock.
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

// The measured pipeline bubble over the pp group: 1 - sum(compute) / (p · max(step)), the same
// definition as the simulator's bubble_fraction, to print next to theoretical_bubble(). A
// collective on `pp_group` (every pp rank calls it, after its step).
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
// p == 1 with v > 1: the peer is this rank; the buffer is handed to the receiving chunk without
// MPI or a copy.
// Trace: "forward"/"backward" on the compute lane (args step, microbatch, chunk), and each wait for a
// receive ("recv_activation"/"recv_grad") or send ("send_wait") on the communication lane.
class PipelineExecutor {
 public:
  PipelineExecutor(Communicator& pp_group, Tracer& tracer);

  // Runs `actions` (this pp rank's list; make_schedule(kind, p, v, m, pp_group.rank())) with
  // chunks[c] as model chunk c (v = chunks.size(), virtual stage c·p + rank). Checks that the list
  // is consistent: peers as the layout implies (before any action runs), every produced
  // activation/gradient sent, every received one consumed. On return every transfer of this rank
  // has completed.
  PipelineStepStats run(const std::vector<Action>& actions, const std::vector<PipelineStage*>& chunks);

  // Grows the pool to at least `buffers` of this shape now (e.g. before the first timed step).
  void reserve(int64_t buffers, const Shape& shape, DType dtype = DType::kF32);
  int64_t pool_size() const { return static_cast<int64_t>(pool_.size()); }

  // The "step" arg of the forward/backward trace events of the following runs (-1 = none given).
  void set_trace_step(int64_t step) { trace_step_ = step; }

 private:
  struct Slot {
    Tensor tensor;
    CommHandle send;  // pending while a send from this buffer is in flight
    bool in_use = false;
  };
  int acquire(int64_t& allocated);
  void release(int slot);

  Communicator& pp_;
  Tracer& tracer_;
  Shape shape_;
  DType dtype_ = DType::kF32;
  std::vector<Slot> pool_;
  int64_t trace_step_ = -1;
};

// One step with a fresh executor (its pool lives only for this call): the simple entry point.
PipelineStepStats run_schedule(const std::vector<Action>& actions, std::vector<PipelineStage*> chunks,
                               Communicator& pp_group, Tracer& tracer);

}  // namespace lattice
