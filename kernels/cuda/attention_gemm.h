// CUDA causal self-attention (GQA) through cuBLASLt strided-batched GEMMs: the scores of a few heads
// at a time are materialized as [T, T] matrices (S = scale · Q Kᵀ, a causal softmax kernel, O = P V),
// so the products run at cuBLAS speed — and on the tensor cores with training.tf32 — at the cost of
// computing the masked half and of T² scratch per head (bounded: heads go in chunks). Same
// contracts as kernels/cpu/attention.h; deterministic (fixed GEMM algorithms, no atomics; the
// dK/dV sums over a GQA group's q heads run in head order with beta = 1).
#pragma once

#include <cstdint>

#include "kernels/attention_shape.h"
#include "kernels/cuda_workspace.h"  // attention_gemm_fits: whether this path takes a shape

namespace lattice::cuda {

void attention_forward_gemm(const float* q, const float* k, const float* v, float* out, float* lse,
                            const AttentionShape& s);
// dq, dk, dv overwritten.
void attention_backward_gemm(const float* dout, const float* q, const float* k, const float* v, const float* out,
                             const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s);

}  // namespace lattice::cuda
