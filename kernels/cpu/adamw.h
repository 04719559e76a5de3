// CPU AdamW: the fused, OpenMP-parallel update loop behind ops::adamw_update.
// Callers (ops::adamw_update) have already checked devices, dtypes and sizes.
#pragma once

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace lattice::cpu {

// One AdamW step over flat f32 CPU tensors of equal numel (see ops::AdamWParams for semantics).
void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  const ops::AdamWParams& p);

}  // namespace lattice::cpu
