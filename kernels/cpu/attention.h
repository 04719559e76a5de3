// CPU causal self-attention (GQA) with BLAS score/value products and saved log-sum-exp, so the
// backward recomputes probabilities (flash-style) instead of storing [T, T] per head.
#pragma once

#include <cstdint>

#include "kernels/attention_shape.h"

namespace lattice::cpu {

// q[B, T, Hq, D], k/v[B, T, Hkv, D] -> out[B, T, Hq, D], lse[B, Hq, T].
void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                       const AttentionShape& s);
// dq, dk, dv overwritten.
void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s);

}  // namespace lattice::cpu
