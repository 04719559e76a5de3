// CPU elementwise kernels: zero/fill/copy/scale/axpy/add, the sums (to the host or into a slot) and
// the bias pair.
#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cstring>

namespace lattice::cpu {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void zero(void* data, int64_t bytes) {
  if (bytes > 0) std::memset(data, 0, static_cast<size_t>(bytes));
}

void fill(float* x, int64_t n, float value) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void copy(const void* src, void* dst, int64_t bytes) {
  if (src == dst || bytes == 0) return;
  std::memmove(dst, src, static_cast<size_t>(bytes));
}

void scale(float* x, int64_t n, float alpha) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void axpy(float alpha, const float* x, float* y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add(const float* a, const float* b, float* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double sum_squares(const float* x, int64_t n) {
  // Blocks of 1024 summed in float (vectorized), blocks accumulated in double: error ~1e-7
  // relative per block, and the result does not depend on the thread count beyond rounding.
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n > kParallelMin) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = lo; i < hi; ++i) s += x[i] * x[i];
    total += s;
  }
  return total;
}

void sum_to(const float* x, int64_t n, double* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  *out = sum;
}

void sum_squares_to(const float* x, int64_t n, double* out) { *out = sum_squares(x, n); }

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > kParallelMin) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] += bias[c];
  }
}

void bias_backward(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  // Parallel over column blocks: each thread owns its columns, so no races and no reduction.
  constexpr int64_t kCols = 256;
  const int64_t blocks = (cols + kCols - 1) / kCols;
#pragma omp parallel for if (rows * cols > kParallelMin) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kCols, nc = std::min(cols, c0 + kCols) - c0;
    float acc[kCols];
    for (int64_t c = 0; c < nc; ++c) acc[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = dy + r * cols + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) acc[c] += row[c];
    }
    for (int64_t c = 0; c < nc; ++c) dbias[c0 + c] += acc[c];
  }
}

}  // namespace lattice::cpu
