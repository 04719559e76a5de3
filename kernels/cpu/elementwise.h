// CPU elementwise kernels (and zero/copy of raw bytes), bias add/reduce on raw f32 buffers (behind ops.h's dispatch).
// All loops are OpenMP-parallel over elements or rows and vectorized in the inner loop.
#pragma once

#include <cstdint>

namespace lattice::cpu {

void zero(void* data, int64_t bytes);
void fill(float* x, int64_t n, float value);
void copy(const void* src, void* dst, int64_t bytes);
void scale(float* x, int64_t n, float alpha);
void axpy(float alpha, const float* x, float* y, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
double sum_squares(const float* x, int64_t n);
// *out = the sum of x, serial and left to right in double (the loss's reference order).
void sum_to(const float* x, int64_t n, double* out);
// *out = sum_squares(x, n).
void sum_squares_to(const float* x, int64_t n, double* out);

// y[N, F] += bias[F].
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);
// dbias[F] += column sums of dy[N, F].
void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols);

}  // namespace lattice::cpu
