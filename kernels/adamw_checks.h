// The argument checks of an AdamW step, shared by ops::adamw_update and adamw_update_runs: every
// tensor defined and f32, one element count, a 1-based step. Throws lattice::Error naming `op`.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace lattice {

// grad_apart: the gradients are addressed apart from the rest (AdamWRun::grad_offset): their count
// is not checked.
void check_adamw_operands(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                          const Tensor& exp_avg_sq, int64_t step, bool grad_apart = false);

}  // namespace lattice
