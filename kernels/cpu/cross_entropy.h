// CPU softmax cross-entropy over rows of logits[N, V] (max-subtracted, rows in parallel).
#pragma once

#include <cstdint>

namespace lattice::cpu {

// targets must already be valid.
void cross_entropy_forward(const float* logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                           int64_t vocab);
// dlogits = (softmax - onehot) * grad_scale; dlogits may alias logits.
void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse, float grad_scale,
                            float* dlogits, int64_t rows, int64_t vocab);

}  // namespace lattice::cpu
