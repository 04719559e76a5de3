// Branch-free float math (exp, sigmoid) that GCC vectorizes inside `#pragma omp simd` loops.
// glibc's expf/tanhf do not vectorize without -ffast-math; these are accurate to ~2 ulp.
// Vectorizing the clamps needs -fno-trapping-math (set in kernels/BUILD.bazel).
#pragma once

#include <cstdint>
#include <bit>

namespace lattice::cpu {

// exp(x) for float: range reduction x = n*ln2 + r, |r| <= ln2/2, Cephes degree-6 polynomial,
// 2^n built in the exponent bits. Inputs are clamped to [-87.3, 88.7]: exp(-inf) gives ~1e-38
// (not 0), exp(+inf) gives ~3.4e38; callers never rely on the extremes.
inline float fast_exp(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.7f ? 88.7f : x;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;  // ln2 split in a high part exact in float
  r = r - n * -2.12194440e-4f;     // and the low remainder
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// 1 / (1 + exp(-x)), saturating cleanly at both ends.
inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

}  // namespace lattice::cpu
