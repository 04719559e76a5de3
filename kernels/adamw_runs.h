// AdamW over runs of flat fp32 buffers: each run is a contiguous range whose elements share a
// weight-decay flag. The optimizer steps its main parameters through this: runs of whole parameters,
// or of parameter ∩ this rank's shard under the distributed optimizer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

struct AdamWRun {
  int64_t offset;  // into the flat buffers passed to adamw_update_runs
  int64_t numel;
  bool decay;      // decoupled weight decay applies (matrices only)
};

struct AdamWHyper {
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
};

// ops::adamw_update on every run; weight decay only where run.decay.
void adamw_update_runs(const Tensor& values, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                       const std::vector<AdamWRun>& runs, const AdamWHyper& hyper, double lr, int64_t step,
                       float grad_scale);

}  // namespace lattice
