// ModelStats: what a config costs before it runs — parameter counts, training FLOPs per token
// (for MFU) and the memory one process needs. `lattice validate` prints format_model_stats().
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"
#include "trainer/config.h"

namespace lattice {

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

  // ---- memory of one process, bytes (fp32 everywhere) ----
  int64_t weight_bytes = 0;      // 4 B/param
  int64_t grad_bytes = 0;        // 4 B/param
  int64_t optimizer_bytes = 0;   // AdamW exp_avg + exp_avg_sq: 8 B/param
  int64_t activation_bytes = 0;  // saved tensors of one micro-batch (see model_stats.cc)
  int64_t total_bytes = 0;       // the sum of the four
};

ModelStats compute_model_stats(const Config& config);

// "78.23 GiB", "12.0 MiB", "512 B".
std::string format_bytes(int64_t bytes);

// A readable multi-line table (M/B params, GFLOP/token, MiB/GiB), one item per line.
// `device`: where the memory figures live (the GPU's memory for cuda; the host keeps only staging).
std::string format_model_stats(const ModelStats& stats, Device device = Device::kCpu);

}  // namespace lattice
