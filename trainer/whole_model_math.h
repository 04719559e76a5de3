// The step's whole-model numbers on any layout, the same bits on every rank: the global-batch mean
// loss (computed on the last pipeline stage, sent to every rank) and the global gradient norm (every
// parameter counted exactly once; partial sums of squares in double, added in a fixed order).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/tensor.h"
#include "model/parameter_store.h"
#include "parallel/communicator.h"
#include "parallel/distributed_optimizer.h"

namespace lattice {

// This rank's groups, as the reductions need them (size-1 groups for a degree of 1).
struct StepGroups {
  Communicator* tp;
  Communicator* dp;
  Communicator* pp;
};

// Mean token loss over the global batch. `token_losses`: this rank's token losses of the step,
// read on the last pipeline stage only (other stages pass anything). The last stage sums its tokens
// in double over dp in rank order, divides by `global_tokens`, takes tp rank 0's value, and
// broadcasts it over pp: every rank returns the same bits.
double global_mean_loss(const Tensor& token_losses, int64_t global_tokens, const StepGroups& groups);

// The global L2 gradient norm after the gradient synchronisation.
class GradNorm {
 public:
  // Without `dist` every dp rank holds the whole reduced gradient; with it, only its shard
  // (DistributedOptimizer::local_grad_sum_squares). `store` and `dist` must outlive this.
  GradNorm(const ParameterStore& store, const DistributedOptimizer* dist, const StepGroups& groups);

  // sqrt of the sum of squares of every non-replica gradient element: the local sum (the store's
  // non-replica runs, or the dist optimizer's shard) summed in order over tp, then pp, then dp (with
  // the distributed optimizer; else dp rank 0's value is broadcast, as the ranks hold the same).
  double compute() const;

 private:
  const ParameterStore& store_;
  const DistributedOptimizer* dist_;
  StepGroups groups_;
  std::vector<std::pair<int64_t, int64_t>> runs_;  // (flat offset, numel) of non-replica parameters
};

}  // namespace lattice
