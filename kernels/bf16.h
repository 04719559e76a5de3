// bfloat16 <-> float for one value: the rounding every bf16 kernel and file reader shares.
// bf16 is the top 16 bits of an IEEE f32 (sign, 8-bit exponent, 7-bit mantissa).
#pragma once

#include <bit>
#include <cstdint>

namespace lattice {

// Exact: every bf16 value is an f32.
inline float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even. Overflow (and ±Inf) gives ±Inf; subnormals round like any other
// value (the bf16 and f32 exponent ranges are the same); a NaN stays a NaN of the same sign, made
// quiet so that dropping the low payload bits cannot turn it into Inf.
inline uint16_t float_to_bfloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the kept lsb carries into bit 16 exactly when the dropped half is above
  // one half ulp, or equal to it with an odd kept lsb; a carry out of the mantissa bumps the
  // exponent, which is the correct rounding (up to Inf from the largest finite values).
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

}  // namespace lattice
