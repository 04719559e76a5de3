// AdamW over runs of flat fp32 buffers: each run is a contiguous range whose elements share a
// weight-decay flag. The optimizer steps its main parameters through this: runs of whole parameters,
// or of parameter ∩ this rank's shard under the distributed optimizer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

struct AdamWRun {
  int64_t offset;  // into the moments, and the values (unless ValuesAt::kGradients)
  int64_t numel;
  bool decay;      // decoupled weight decay applies (matrices only)
  // Into the gradients and the copy; -1: offset. They differ under the distributed optimizer when
  // its reduce-scatter is in place: a shard's gradients stay in the flat gradient buffer, where the
  // bf16 parameters' write-back goes too, while its state is packed.
  int64_t grad_offset = -1;
  int64_t grads_at() const { return grad_offset < 0 ? offset : grad_offset; }
};

// Where a run's values lie: beside its moments (at offset), or beside its gradients (at grads_at()):
// under the distributed optimizer with in-place buckets, fp32 parameters are their own main
// parameters, a shard's in the flat buffer like its gradients, while its moments are packed.
enum class ValuesAt { kMoments, kGradients };

struct AdamWHyper {
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
};

// ops::adamw_update on every run; weight decay only where run.decay. `copy` (optional; f32 or bf16,
// as many elements as grads; not with ValuesAt::kGradients): each run's updated values are also
// written there at the gradients' indices, in copy's dtype (the bf16 parameters' write-back),
// elements outside the runs untouched.
// A backend with Backend::adamw_update_runs (CUDA) does it all in a few launches, fusing the copy;
// the others run adamw_update per run, then a cast per stretch of adjacent runs. Same bits.
void adamw_update_runs(const Tensor& values, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                       const std::vector<AdamWRun>& runs, const AdamWHyper& hyper, double lr, int64_t step,
                       float grad_scale, const Tensor& copy = {}, ValuesAt values_at = ValuesAt::kMoments);

}  // namespace lattice
