// CPU f32 <-> bf16 conversion loops.
#include "kernels/cpu/cast.h"

#include "kernels/bf16.h"

namespace lattice::cpu {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bfloat16(src[i]);
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(src[i]);
}

}  // namespace lattice::cpu
