// Element access for the typed kernels (kernels/typed_kernels.h): loads widen bf16 exactly, stores
// round to nearest even with kernels/bf16.h's bits, so a kernel that loads, computes in f32 and
// stores gives the bits of F32Staging's widen / f32 kernel / round. The bf16 test is per operand and
// the same for every thread (no divergence); f32 operands cost one predictable branch.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

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

}  // namespace lattice::cuda
