// The CUDA backend's device workspaces that are not the model's tensors, sized in one place so that
// the code that allocates them (kernels/cuda/matmul.cc, attention_gemm.cu, attention.cu) and the
// memory plan that counts them (trainer/memory_plan.cc, built without CUDA too) agree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention_shape.h"

namespace lattice {

// cuBLASLt's workspace, allocated at the first GEMM and kept: Hopper's recommended size
// (../shared/GPU.md §2).
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t{32} << 20;

// The f32 vector cuBLASLt's bias-gradient epilogue writes before it is added to a linear layer's
// bias gradient (kernels/cuda/matmul.h, gemm_bias_grad), allocated with the cuBLASLt workspace: room
// for 65536 output features; a wider layer sums its bias gradient in its own kernel.
inline constexpr int64_t kBiasGradScratchBytes = int64_t{256} << 10;

// The f32 GEMM attention materializes [T, T] score matrices, two per head in its backward, for
// chunks of kv heads within this budget.
inline constexpr int64_t kAttentionGemmScratchBytes = int64_t{512} << 20;

// Whether one head's two [T, T] f32 score buffers fit the budget (else the flash kernel runs).
inline bool attention_gemm_fits(const AttentionShape& s) {
  return 2 * s.seq * s.seq * int64_t{sizeof(float)} <= kAttentionGemmScratchBytes;
}

// kv heads per batched GEMM of the GEMM attention.
inline int64_t attention_gemm_chunk(const AttentionShape& s) {
  return std::clamp<int64_t>(kAttentionGemmScratchBytes / (2 * s.seq * s.seq * int64_t{sizeof(float)}), 1,
                             s.kv_heads);
}

// The most f32 attention allocates at once, in its backward: the [B, Hq, T] row dot products of
// dO and O that both kernels take, and the GEMM path's two [T, T] buffers per head of a chunk.
inline int64_t f32_attention_workspace_bytes(const AttentionShape& s) {
  const int64_t dvec = s.batch * s.q_heads * s.seq * int64_t{sizeof(float)};
  if (!attention_gemm_fits(s)) return dvec;
  return dvec + 2 * attention_gemm_chunk(s) * s.seq * s.seq * int64_t{sizeof(float)};
}

// cuDNN's SDPA workspace, which cuDNN sizes as it builds a graph on the GPU, estimated where no GPU
// can say (`lattice validate` and `lattice plan` off the GPU): before 9.25 its deterministic backward
// holds dP in it on Hopper, b·h·ceil64(T)·ceil128(T) bf16 (../shared/GPU.md §1); its forward none.
inline int64_t cudnn_sdpa_workspace_estimate(const AttentionShape& s) {
  const auto up = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
  return s.batch * s.q_heads * up(s.seq, 64) * up(s.seq, 128) * 2;
}

}  // namespace lattice
