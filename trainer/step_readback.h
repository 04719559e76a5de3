// The one place per step where device values come back to the host: the summed token losses
// of the step and the squared gradient norm; and, when sampling text, the next token's logits row.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

// Mean of all token losses in `token_losses` (f32), summed in double.
double read_mean_loss(const Tensor& token_losses);

// The first `columns` values of row `row` of logits f32[N, V] (generation: the next token's row).
std::vector<float> read_logits_row(const Tensor& logits, int64_t row, int64_t columns);

}  // namespace lattice
