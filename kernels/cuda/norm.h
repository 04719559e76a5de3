// CUDA LayerNorm and RMSNorm over rows of length H: the typed Backend entries (kernels/typed_kernels.h:
// data operands f32 or bf16 each), the same contracts as kernels/cpu/norm.h (statistics in float,
// two-pass; dx overwritten, dgamma/dbeta accumulated).
#pragma once

#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice::cuda {

// beta may have null data. mean/rstd get one value per row.
void layernorm_forward(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean, float* rstd,
                       int64_t rows, int64_t hidden);
// dx overwritten (then += residual, if its data is non-null, rounded as a stored dx plus residual);
// dgamma (and dbeta if its data is non-null) accumulated. Deterministic (no atomics).
void layernorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* mean, const float* rstd, DataIn residual,
                        DataOut dx, DataOut dgamma, DataOut dbeta, int64_t rows, int64_t hidden);
void rmsnorm_forward(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows, int64_t hidden);
void rmsnorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataIn residual, DataOut dx,
                      DataOut dgamma, int64_t rows, int64_t hidden);

}  // namespace lattice::cuda
