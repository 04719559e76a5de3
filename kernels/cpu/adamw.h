// CPU AdamW: the fused, OpenMP-parallel update loop behind ops::adamw_update.
// Callers (ops::adamw_update) have already checked devices, dtypes and sizes.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace lattice::cpu {

// One AdamW step over n elements of flat f32 buffers (see ops::AdamWParams for semantics).
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const ops::AdamWParams& p);

}  // namespace lattice::cpu
