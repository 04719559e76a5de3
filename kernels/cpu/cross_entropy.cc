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
  // The whole vocabulary is one shard starting at column 0 with no padding.
  cross_entropy_shard_backward(logits, targets, lse, grad_scale, dlogits, rows, vocab, 0, vocab);
}

void cross_entropy_shard_max(const float* logits, float* row_max, int64_t rows, int64_t cols, int64_t valid) {
#pragma omp parallel for if (rows > 1 && rows * valid > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * cols;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < valid; ++j) m = x[j] > m ? x[j] : m;
    row_max[r] = m;
  }
}

void cross_entropy_shard_sums(const float* logits, const int32_t* targets, const float* row_max, float* sum_exp,
                              float* target_logit, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
#pragma omp parallel for if (rows > 1 && rows * valid > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * cols;
    const float m = row_max[r];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < valid; ++j) sum += fast_exp(x[j] - m);
    sum_exp[r] = sum;
    const int64_t t = static_cast<int64_t>(targets[r]) - first_col;
    target_logit[r] = t >= 0 && t < valid ? x[t] : 0.0f;
  }
}

void cross_entropy_shard_loss(const float* row_max, const float* sum_exp, const float* target_logit, float* losses,
                              float* lse, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float l = row_max[r] + std::log(sum_exp[r]);
    lse[r] = l;
    losses[r] = l - target_logit[r];
  }
}

void cross_entropy_shard_backward(const float* logits, const int32_t* targets, const float* lse, float grad_scale,
                                  float* dlogits, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
#pragma omp parallel for if (rows > 1 && rows * cols > (1 << 14)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * cols;
    float* d = dlogits + r * cols;
    const float l = lse[r];
    // Element j is read before it is written, so d == x (in place) is fine.
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) d[j] = fast_exp(x[j] - l) * grad_scale;
    for (int64_t j = valid; j < cols; ++j) d[j] = 0.0f;  // padding columns: no gradient
    const int64_t t = static_cast<int64_t>(targets[r]) - first_col;
    if (t >= 0 && t < valid) d[t] -= grad_scale;
  }
}

}  // namespace lattice::cpu
