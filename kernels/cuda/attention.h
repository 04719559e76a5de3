// CUDA causal self-attention (GQA), fp32 storage and math; same contracts as kernels/cpu/attention.h.
// One of two implementations (the other: kernels/cuda/attention_gemm.h; cuda_backend.cc picks).
// This one is flash-style: 64x64 tiles in shared memory with online softmax, no [T, T] matrix in global memory.
// The backward is deterministic (no atomics): dK/dV are reduced per (batch, kv head, kv tile) block
// over every q head of the group, dQ per (batch, q head, q tile) block. head_dim must be in
// [1, 128]; a larger one is a lattice::Error. Everything runs on compute_stream().
#pragma once

#include <cstdint>

#include "kernels/attention_shape.h"

namespace lattice::cuda {

// q[B, T, Hq, D], k/v[B, T, Hkv, D] -> out[B, T, Hq, D], lse[B, Hq, T] (natural log). O(T) memory.
void attention_forward_flash(const float* q, const float* k, const float* v, float* out, float* lse,
                             const AttentionShape& s);
// dq, dk, dv overwritten.
void attention_backward_flash(const float* dout, const float* q, const float* k, const float* v, const float* out,
                              const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s);

// dvec[(b * Hq + h) * T + t] = sum_d dout * out at [b, t, h, :] (the softmax backward's row term).
void attention_dvec(const float* dout, const float* out, float* dvec, const AttentionShape& s);

}  // namespace lattice::cuda
