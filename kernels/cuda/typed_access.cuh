// Element access for the typed kernels (kernels/typed_kernels.h): loads widen bf16 exactly, stores
// round to nearest even with kernels/bf16.h's bits, so a kernel that loads, computes in f32 and
// stores gives the bits of F32Staging's widen / f32 kernel / round. The bf16 test is per operand and
// the same for every thread (no divergence); f32 operands cost one predictable branch.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/typed_kernels.h"

namespace lattice::cuda {

// kernels/bf16.h's float_to_bfloat16, bit for bit (its std::bit_cast version is host-only).
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);  // nearest even; overflow carries to Inf
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ __forceinline__ float load(DataIn d, int64_t i) {
  return d.bf16 ? bf16_bits_to_f32(static_cast<const uint16_t*>(d.data)[i]) : static_cast<const float*>(d.data)[i];
}

// The current value of an output that is read too (accumulations, in-place updates).
__device__ __forceinline__ float load(DataOut d, int64_t i) { return load(DataIn{d.data, d.bf16}, i); }

__device__ __forceinline__ void store(DataOut d, int64_t i, float v) {
  if (d.bf16) {
    static_cast<uint16_t*>(d.data)[i] = f32_to_bf16_bits(v);
  } else {
    static_cast<float*>(d.data)[i] = v;
  }
}

// What a load gives back after store(d, i, v): v rounded to d's dtype.
__device__ __forceinline__ float stored_value(DataOut d, float v) {
  return d.bf16 ? bf16_bits_to_f32(f32_to_bf16_bits(v)) : v;
}

// Packs: eight consecutive elements per thread, one 16-byte access for bf16 (two for f32) where
// the eight are 16-byte aligned, else element by element. Element-at-a-time access keeps too few
// bytes in flight to reach HBM bandwidth (measured on the H200: 2-byte loads gave ~0.7 TB/s). A
// pack's values are the same whichever way they were read, so callers that fix which thread owns
// which pack get the same bits on either path.
constexpr int kPack = 8;
struct alignas(16) Bf16Pack {
  uint16_t v[kPack];
};
struct alignas(16) F32Half {
  float v[kPack / 2];
};

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// v[k] = d[i + k] for k < count (count <= kPack); v[count, kPack) is left as it was.
__device__ __forceinline__ void load_pack(DataIn d, int64_t i, int count, float (&v)[kPack]) {
  if (d.bf16) {
    const uint16_t* p = static_cast<const uint16_t*>(d.data) + i;
    if (count == kPack && aligned16(p)) {
      const Bf16Pack packed = *reinterpret_cast<const Bf16Pack*>(p);
#pragma unroll
      for (int k = 0; k < kPack; ++k) v[k] = bf16_bits_to_f32(packed.v[k]);
      return;
    }
  } else {
    const float* p = static_cast<const float*>(d.data) + i;
    if (count == kPack && aligned16(p)) {
      const F32Half lo = reinterpret_cast<const F32Half*>(p)[0], hi = reinterpret_cast<const F32Half*>(p)[1];
#pragma unroll
      for (int k = 0; k < kPack / 2; ++k) {
        v[k] = lo.v[k];
        v[k + kPack / 2] = hi.v[k];
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    if (k < count) v[k] = load(d, i + k);
  }
}

__device__ __forceinline__ void load_pack(DataOut d, int64_t i, int count, float (&v)[kPack]) {
  load_pack(DataIn{d.data, d.bf16}, i, count, v);
}

// d[i + k] = v[k] for k < count, rounded as store() rounds.
__device__ __forceinline__ void store_pack(DataOut d, int64_t i, int count, const float (&v)[kPack]) {
  if (d.bf16) {
    uint16_t* p = static_cast<uint16_t*>(d.data) + i;
    if (count == kPack && aligned16(p)) {
      Bf16Pack packed;
#pragma unroll
      for (int k = 0; k < kPack; ++k) packed.v[k] = f32_to_bf16_bits(v[k]);
      *reinterpret_cast<Bf16Pack*>(p) = packed;
      return;
    }
  } else {
    float* p = static_cast<float*>(d.data) + i;
    if (count == kPack && aligned16(p)) {
      F32Half lo, hi;
#pragma unroll
      for (int k = 0; k < kPack / 2; ++k) {
        lo.v[k] = v[k];
        hi.v[k] = v[k + kPack / 2];
      }
      reinterpret_cast<F32Half*>(p)[0] = lo;
      reinterpret_cast<F32Half*>(p)[1] = hi;
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    if (k < count) store(d, i + k, v[k]);
  }
}

// The elements of pack p of an n-element operand: kPack, or what is left at the end.
__device__ __forceinline__ int pack_count(int64_t p, int64_t n) {
  const int64_t left = n - p * kPack;
  return left < kPack ? static_cast<int>(left) : kPack;
}

// Blocks of `threads` for a grid-stride loop over the packs of n elements.
inline unsigned pack_grid(int64_t n, int threads) { return grid_for((n + kPack - 1) / kPack, threads); }

// Calls body(i, count) for each pack of [0, n) (elements [i, i + count)), grid-stride over packs.
template <class Body>
__device__ __forceinline__ void for_each_pack(int64_t n, Body body) {
  const int64_t packs = (n + kPack - 1) / kPack;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    body(p * kPack, pack_count(p, n));
  }
}

// In a kernel with a block per row: calls body(c, count) for the packs of a row of n elements that
// this thread owns, threadIdx.x, threadIdx.x + blockDim.x, ..., in that order.
template <class Body>
__device__ __forceinline__ void for_each_row_pack(int64_t n, Body body) {
  for (int64_t p = threadIdx.x; p * kPack < n; p += blockDim.x) body(p * kPack, pack_count(p, n));
}

}  // namespace lattice::cuda
