// The step's whole-model numbers on any layout, the same bits on every rank: the global-batch mean
// loss (computed on the last pipeline stage, sent to every rank) and the global gradient norm (every
// parameter counted exactly once; partial sums of squares in double, added in a fixed order).
#pragma once

#include <cstdint>

#include "parallel/communicator.h"
#include "parallel/optimizer.h"

namespace lattice {

// This rank's groups, as the reductions need them (size-1 groups for a degree of 1).
struct StepGroups {
  Communicator* tp;
  Communicator* dp;
  Communicator* pp;
};

// Mean token loss over the global batch. `local_loss_sum`: this rank's sum of its token losses
// (StepReadback::loss_sum), read on the last pipeline stage only (other stages pass anything). The
// last stage sums it in double over dp in rank order, divides by `global_tokens`, takes tp rank 0's
// value, and broadcasts it over pp: every rank returns the same bits.
double global_mean_loss(double local_loss_sum, int64_t global_tokens, const StepGroups& groups);

// The global L2 gradient norm after the gradient synchronisation.
class GradNorm {
 public:
  // The optimizer's part of the reduced gradient (Optimizer::norm_grads): the whole model on every
  // dp rank, or its shard when sharded. `optimizer` must outlive this.
  GradNorm(const Optimizer& optimizer, const StepGroups& groups);

  // sqrt of the sum of squares of every non-replica gradient element: `local_sum_squares` (this
  // rank's, StepReadback::grad_sum_squares) summed in order over tp, then pp, then dp (sharded; else
  // dp rank 0's value is broadcast, as the ranks hold the same).
  double compute(double local_sum_squares) const;

 private:
  const Optimizer& optimizer_;
  StepGroups groups_;
};

}  // namespace lattice
