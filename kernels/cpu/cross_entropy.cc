// CPU softmax cross-entropy.
#include "kernels/cpu/cross_entropy.h"

#include <cmath>

#include "kernels/cpu/vec_math.h"

namespace lattice::cpu {

void cross_entropy_forward(const float* logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                           int64_t vocab) {
#pragma omp parallel for if (rows > 1 && rows * vocab > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < vocab; ++j) m = x[j] > m ? x[j] : m;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vocab; ++j) sum += fast_exp(x[j] - m);
    const float l = m + std::log(sum);
    lse[r] = l;
    losses[r] = l - x[targets[r]];
  }
}

void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse, float grad_scale,
                            float* dlogits, int64_t rows, int64_t vocab) {
#pragma omp parallel for if (rows > 1 && rows * vocab > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    float* d = dlogits + r * vocab;
    const float l = lse[r];
    // Element j is read before it is written, so d == x (in place) is fine.
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) d[j] = fast_exp(x[j] - l) * grad_scale;
    d[targets[r]] -= grad_scale;
  }
}

}  // namespace lattice::cpu
