// CPU dtype conversion between f32 and bf16 (kernels/bf16.h's rounding), OpenMP-parallel.
// Callers (ops::cast) have already checked dtypes and sizes.
#pragma once

#include <cstdint>

namespace lattice::cpu {

// dst[i] = bf16 of src[i], round to nearest even (NaN quiet, overflow to Inf).
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
// dst[i] = src[i] widened, exactly.
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

}  // namespace lattice::cpu
