// ModelStats: what a config costs before it runs — parameter counts, training FLOPs per token
// (for MFU) and the memory one process needs. `lattice validate` prints format_model_stats().
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"
#include "trainer/config.h"

namespace lattice {

// Bytes the optimizer step moves per parameter (it is bound by memory bandwidth): AdamW reads the
// gradient, two moments and the fp32 master, writes the moments and master and the compute copy,
// and the global norm reads the gradient once more. `lattice plan` times the step with it and
// `lattice bench` derives the bandwidth it measured.
constexpr double kOptimizerBytesPerParam = 36;

struct ModelStats {
  // ---- parameters (from model_parameter_specs) ----
  int64_t num_params = 0;            // everything the optimizer updates
  int64_t embedding_params = 0;      // word + learned position embeddings + untied lm_head
  int64_t non_embedding_params = 0;  // num_params - embedding_params (Kaplan's N)
  int64_t matmul_params = 0;         // weights of the GEMMs one token passes through, LM head
                                     // included (tied or not); no norms, biases, embedding lookups

  // ---- compute ----
  // Training FLOPs per token = 6 * matmul_params + 12 * L * T * (Hq * D)   (fwd + bwd, PaLM/nanoGPT
  // MFU convention: the attention term counts QK^T and PV over the full T, not the causal half).
  double matmul_flops_per_token = 0;     // 6 * matmul_params
  double attention_flops_per_token = 0;  // 12 * L * T * Hq * D
  double flops_per_token = 0;            // the sum
  int64_t tokens_per_iter = 0;           // global_batch_size * seq_length
  double flops_per_iter = 0;             // flops_per_token * tokens_per_iter

  // ---- memory of one process holding the whole model, bytes, in training.precision ----
  // Megatron's accounting: fp32 is 4 + 4 + 8 = 16 B/param; bf16 is 2 (compute copy) + 4 (fp32
  // gradients) + 4 (fp32 master weights) + 8 (moments) = 18 B/param.
  Precision precision = Precision::kFp32;
  int64_t weight_bytes = 0;      // the compute copy: 4 B/param (fp32) or 2 B/param (bf16)
  int64_t grad_bytes = 0;        // fp32 gradient accumulation: 4 B/param
  int64_t main_param_bytes = 0;  // fp32 master weights: 4 B/param under bf16; none in fp32 (the weights are them)
  int64_t optimizer_bytes = 0;   // AdamW exp_avg + exp_avg_sq: 8 B/param
  int64_t activation_bytes = 0;  // saved tensors of one micro-batch (see model_stats.cc)
  int64_t total_bytes = 0;       // the sum of the five
};

// The per-rank share under a parallel layout: weights, gradients and activations split over
// tensor × pipeline; master weights and moments also over data with the distributed optimizer
// (fp32 weights are their own master weights, sharded too: Megatron's 4 + 4 + 8/d).
struct RankMemory {
  int64_t weight_bytes = 0, grad_bytes = 0, main_param_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;
  int64_t total_bytes = 0;
  double bytes_per_param = 0;  // (weights + gradients + master weights + moments) / parameters on the rank
};
RankMemory rank_memory(const ModelStats& stats, int tensor, int pipeline, int data, bool distributed_optimizer);

ModelStats compute_model_stats(const Config& config);

// "78.23 GiB", "12.0 MiB", "512 B".
std::string format_bytes(int64_t bytes);

// A readable multi-line table (M/B params, GFLOP/token, MiB/GiB), one item per line.
// `device`: where the memory figures live (the GPU's memory for cuda; the host keeps only staging).
std::string format_model_stats(const ModelStats& stats, Device device = Device::kCpu);

}  // namespace lattice
