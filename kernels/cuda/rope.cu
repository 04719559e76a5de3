// CUDA RoPE, matching kernels/cpu/rope.cc: cos/sin[t, i] (i < D/2) computed in double
// (inv_freq = theta^(-2i/D) by pow, angle t * inv_freq, then cos/sin) and rounded to float, because
// angles reach ~1e4 rad at long contexts where a float angle loses digits. The table is built per
// call into pool scratch (seq * D/2 entries: cheap next to the rotation), then every (b, t, h, i)
// pair is rotated in place, x f32 or bf16 (kernels/cuda/typed_access.cuh). Odd D leaves the last
// element alone, as on the CPU (half = D / 2).
#include "kernels/cuda/rope.h"

#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {

namespace {

constexpr int kThreads = 256;

// cos_t/sin_t[t * half + i] for t < seq, i < half; the same double expressions as the CPU table.
__global__ void rope_table_kernel(float* cos_t, float* sin_t, int64_t seq, int64_t half, int64_t dim,
                                  float theta) {
  const int64_t n = seq * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / half, i = idx % half;
    const double inv_freq =
        pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double a = static_cast<double>(t) * inv_freq;
    cos_t[idx] = static_cast<float>(cos(a));
    sin_t[idx] = static_cast<float>(sin(a));
  }
}

// One thread per pair (x1 = p[i], x2 = p[half + i]) of row ((b * seq + t) * heads + h).
// Forward: y1 = x1 c - x2 s, y2 = x2 c + x1 s. Inverse: the same with s negated (sign).
__global__ void rope_apply_kernel(DataOut x, const float* cos_t, const float* sin_t, int64_t seq, int64_t heads,
                                  int64_t dim, int64_t half, int64_t pairs, float sign) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t row = idx / half;           // (b * seq + t) * heads + h
    const int64_t t = (row / heads) % seq;
    const int64_t i1 = row * dim + i, i2 = i1 + half;
    const float c = cos_t[t * half + i];
    const float si = sign * sin_t[t * half + i];
    const float x1 = load(x, i1), x2 = load(x, i2);
    store(x, i1, x1 * c - x2 * si);
    store(x, i2, x2 * c + x1 * si);
  }
}

}  // namespace

void rope(DataOut x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse) {
  const int64_t half = dim / 2;
  const int64_t pairs = batch * seq * heads * half;
  if (pairs <= 0) return;
  const int64_t entries = seq * half;
  // Pool scratch, released in stream order (after the kernels that read it) on every exit path;
  // release never throws.
  struct Table {
    float* ptr;
    ~Table() { release(ptr); }
  } table{static_cast<float*>(allocate(2 * static_cast<size_t>(entries) * sizeof(float)))};
  float* cos_t = table.ptr;
  float* sin_t = table.ptr + entries;
  rope_table_kernel<<<grid_for(entries, kThreads), kThreads, 0, compute_stream()>>>(cos_t, sin_t, seq, half, dim,
                                                                                    theta);
  LATTICE_CUDA_LAUNCHED();
  rope_apply_kernel<<<grid_for(pairs, kThreads), kThreads, 0, compute_stream()>>>(x, cos_t, sin_t, seq, heads, dim,
                                                                                  half, pairs,
                                                                                  inverse ? -1.0f : 1.0f);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace lattice::cuda
