// CUDA LayerNorm and RMSNorm over rows of length H: the raw Backend entries, the same contracts as
// kernels/cpu/norm.h (statistics in float, two-pass; dx overwritten, dgamma/dbeta accumulated).
#pragma once

#include <cstdint>

namespace lattice::cuda {

// beta may be null. mean/rstd get one value per row.
void layernorm_forward(const float* x, const float* gamma, const float* beta, float eps, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t hidden);
// dx overwritten; dgamma (and dbeta if non-null) accumulated. Deterministic (no atomics).
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t hidden);
void rmsnorm_forward(const float* x, const float* gamma, float eps, float* y, float* rstd, int64_t rows,
                     int64_t hidden);
void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                      float* dgamma, int64_t rows, int64_t hidden);

}  // namespace lattice::cuda
