// CUDA activations. Formulas are written exactly as kernels/cpu/activation.cc writes them (GELU as
// x * sigmoid(2u), the same function as 0.5 x (1 + tanh(u)); exp with the tails of cpu::fast_exp)
// so both backends round the same expressions; expf is the accurate libdevice expf (~2 ulp from
// fast_exp), not the __expf intrinsic. Operands are f32 or bf16 each (kernels/cuda/typed_access.cuh).
#include "kernels/cuda/activation.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

// The tails of cpu::fast_exp: below, its input is clamped at -87.3 (exp ~1.2e-38, not a denormal
// or 0); above, its 2^n factor reaches the infinite exponent once n = 128 (inputs from ~88.38,
// under the 88.7 clamp), so the CPU sigmoid of a very negative input is exactly 0. Matching both
// keeps the tails equal (incl. the NaN of 0 * inf in gelu_backward at |x| ~ 1e13 and beyond).
__device__ __forceinline__ float clamped_exp(float x) {
  x = x < -87.3f ? -87.3f : x;
  if (floorf(x * 1.44269504088896341f + 0.5f) >= 128.0f) return INFINITY;
  return expf(x);
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + clamped_exp(-x)); }

__global__ void gelu_forward_kernel(DataIn x, DataOut y, int64_t n) {
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack] = {};
    load_pack(x, i, count, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const float u = kSqrt2OverPi * (v[k] + kCoeff * v[k] * v[k] * v[k]);
      v[k] = v[k] * sigmoid(2.0f * u);
    }
    store_pack(y, i, count, v);
  });
}

__global__ void gelu_backward_kernel(DataIn dy, DataIn x, DataOut dx, int64_t n) {
  // y = x s, s = sigmoid(2u): dy/dx = s + x * 2 s (1 - s) * du/dx, du/dx = sqrt(2/pi) (1 + 3c x^2).
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack] = {}, d[kPack] = {};
    load_pack(x, i, count, v);
    load_pack(dy, i, count, d);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const float u = kSqrt2OverPi * (v[k] + kCoeff * v[k] * v[k] * v[k]);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v[k] * v[k]);
      const float s = sigmoid(2.0f * u);
      d[k] = d[k] * (s + 2.0f * v[k] * s * (1.0f - s) * du);
    }
    store_pack(dx, i, count, d);  // overwritten, as on the CPU
  });
}

__global__ void swiglu_forward_kernel(DataIn gate, DataIn up, DataOut y, int64_t n) {
  for_each_pack(n, [&](int64_t i, int count) {
    float g[kPack] = {}, u[kPack] = {};
    load_pack(gate, i, count, g);
    load_pack(up, i, count, u);
#pragma unroll
    for (int k = 0; k < kPack; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    store_pack(y, i, count, g);
  });
}

__global__ void swiglu_backward_kernel(DataIn dy, DataIn gate, DataIn up, DataOut dgate, DataOut dup, int64_t n) {
  // silu(g) = g s, silu'(g) = s (1 + g (1 - s)). All loads before the stores: in-place safe.
  for_each_pack(n, [&](int64_t i, int count) {
    float g[kPack] = {}, u[kPack] = {}, d[kPack] = {};
    load_pack(gate, i, count, g);
    load_pack(up, i, count, u);
    load_pack(dy, i, count, d);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const float s = sigmoid(g[k]);
      const float dg = d[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      u[k] = d[k] * g[k] * s;
      g[k] = dg;
    }
    store_pack(dgate, i, count, g);
    store_pack(dup, i, count, u);
  });
}

}  // namespace

void gelu_forward(DataIn x, DataOut y, int64_t n) {
  if (n <= 0) return;
  gelu_forward_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(x, y, n);
  LATTICE_CUDA_LAUNCHED();
}

void gelu_backward(DataIn dy, DataIn x, DataOut dx, int64_t n) {
  if (n <= 0) return;
  gelu_backward_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(dy, x, dx, n);
  LATTICE_CUDA_LAUNCHED();
}

void swiglu_forward(DataIn gate, DataIn up, DataOut y, int64_t n) {
  if (n <= 0) return;
  swiglu_forward_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(gate, up, y, n);
  LATTICE_CUDA_LAUNCHED();
}

void swiglu_backward(DataIn dy, DataIn gate, DataIn up, DataOut dgate, DataOut dup, int64_t n) {
  if (n <= 0) return;
  swiglu_backward_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(dy, gate, up, dgate, dup, n);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace lattice::cuda
