// The argument checks of an AdamW step, shared by ops::adamw_update and adamw_update_runs: every
// tensor defined and f32, one element count, a 1-based step. Throws lattice::Error naming `op`.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace lattice {

// by_runs: the tensors are addressed by runs (adamw_update_runs checks each run's bounds): their
// counts are not compared.
void check_adamw_operands(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                          const Tensor& exp_avg_sq, int64_t step, bool by_runs = false);

}  // namespace lattice
