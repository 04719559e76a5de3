// The argument checks of an AdamW step, shared by ops::adamw_update and adamw_update_runs: every
// tensor defined and f32, one element count, a 1-based step. Throws lattice::Error naming `op`.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace lattice {

void check_adamw_operands(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                          const Tensor& exp_avg_sq, int64_t step);

}  // namespace lattice
