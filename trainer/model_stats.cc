// Parameter counts, FLOPs per token and the memory estimate of a config.
//
// Activation estimate (in the compute dtype, statistics in fp32; one micro-batch of B sequences of
// T tokens, N = B*T rows; with gradient accumulation only one micro-batch's activations are alive at
// a time). Per layer, the tensors the explicit backward keeps:
//   layer input x [N,H], input_norm output [N,H], norm statistics (mean+rstd: 2N, rmsnorm: N),
//   q/k/v after rope [N,(Hq+2*Hkv)*D], attention output [N,Hq*D] and its logsumexp [N*Hq]
//   (flash-style: no [T,T] probabilities), residual after attention [N,H], post_attention_norm
//   output [N,H] and statistics, the MLP: gelu keeps the pre-activation and the activation [2 x N,F],
//   swiglu keeps gate, up and their product [3 x N,F].
// After the last layer: final_norm input and output [2 x N,H] + statistics, logits [N,V] twice
// (logits and their gradient, the largest single item for small models), per-row loss and
// logsumexp [2N], token ids and targets [2N] (int32, also 4 bytes).
// Workspace of the backward pass (a few [N,max(H,F)] gradients) is not counted.
// Activation recomputation (model.recompute) changes what a layer keeps; the recomputed part lives
// in one shared layer's worth (one model chunk here):
//   full, R = recompute_num_layers (0 = all L): R layers keep only x [N,H]; the other L-R layers
//     and the shared set keep everything but x: activations = R*[N,H] + (L-R)*layer + 1*(layer - x).
//   selective: each layer keeps all but the norm outputs [2 x N,H], their statistics and the
//     activation output [N,F]; the shared set holds those once.
#include "trainer/model_stats.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/model_parameters.h"

namespace lattice {

namespace {

bool is_matmul_weight(const std::string& name) {
  // Linear layer weights inside the blocks, and the untied LM head. Not: embedding tables,
  // norm weights, biases.
  const auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (name == "lm_head.weight") return true;
  if (!ends_with("_proj.weight")) return false;
  return name.find(".attention.") != std::string::npos || name.find(".mlp.") != std::string::npos;
}

std::string count_str(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{}", n);
}

// FLOPs with a unit that keeps three significant figures readable: GFLOP (the unit of record),
// MFLOP for tiny models; TFLOP/PFLOP per iteration for big ones.
std::string flops_str(double f) {
  if (f >= 1e15) return fmt::format("{:.3f} PFLOP", f / 1e15);
  if (f >= 1e12) return fmt::format("{:.3f} TFLOP", f / 1e12);
  if (f >= 1e8) return fmt::format("{:.3f} GFLOP", f / 1e9);
  return fmt::format("{:.3f} MFLOP", f / 1e6);
}

std::string with_commas(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string format_bytes(int64_t b) {
  const double kib = 1024.0, mib = kib * 1024, gib = mib * 1024;
  if (b >= gib) return fmt::format("{:.2f} GiB", b / gib);
  if (b >= mib) return fmt::format("{:.1f} MiB", b / mib);
  if (b >= kib) return fmt::format("{:.1f} KiB", b / kib);
  return fmt::format("{} B", b);
}

ModelStats compute_model_stats(const Config& config) {
  const ModelConfig& m = config.model;
  ModelStats s;
  for (const ParamSpec& p : model_parameter_specs(m)) {
    const int64_t n = shape_numel(p.shape);
    s.num_params += n;
    if (p.name == "embedding.word_embeddings.weight" || p.name == "embedding.position_embeddings.weight" ||
        p.name == "lm_head.weight")
      s.embedding_params += n;
    if (is_matmul_weight(p.name)) s.matmul_params += n;
  }
  // Tied embeddings: the LM head GEMM reuses the word embedding table; it still costs its FLOPs.
  if (m.tie_embeddings) s.matmul_params += m.vocab_size * m.hidden_size;
  s.non_embedding_params = s.num_params - s.embedding_params;

  const int64_t L = m.num_layers, T = m.seq_length, H = m.hidden_size, F = m.ffn_hidden_size, V = m.vocab_size;
  const int64_t Hq = m.num_attention_heads, Hkv = m.num_kv_heads, D = m.head_dim();
  s.matmul_flops_per_token = 6.0 * static_cast<double>(s.matmul_params);
  s.attention_flops_per_token = 12.0 * static_cast<double>(L) * T * Hq * D;
  s.flops_per_token = s.matmul_flops_per_token + s.attention_flops_per_token;
  s.tokens_per_iter = config.training.global_batch_size * T;
  s.flops_per_iter = s.flops_per_token * static_cast<double>(s.tokens_per_iter);

  s.precision = config.training.precision;
  const int64_t compute_size = static_cast<int64_t>(dtype_size(precision_dtype(s.precision)));
  s.weight_bytes = compute_size * s.num_params;
  s.grad_bytes = 4 * s.num_params;
  s.main_param_bytes = s.precision == Precision::kFp32 ? 0 : 4 * s.num_params;
  s.optimizer_bytes = 8 * s.num_params;

  const int64_t N = config.training.micro_batch_size * T;
  const int64_t norm_stats = m.norm == NormKind::kLayerNorm ? 2 : 1;
  const int64_t mlp = m.activation == Activation::kSwiglu ? 3 * F : 2 * F;
  // Per token row: tensors in the compute dtype, and fp32 statistics (norm stats, attention lse,
  // loss and its lse) and int32 ids/targets.
  const int64_t layer_values = 4 * H + (Hq + 2 * Hkv) * D + Hq * D + mlp, layer_stats = Hq + 2 * norm_stats;
  const int64_t final_values = 2 * H + 2 * V, final_stats = norm_stats + 2 + 2;
  // Per layer kept (values, stats) and the shared recomputed set, by recompute mode.
  int64_t kept_values = L * layer_values, kept_stats = L * layer_stats, shared_values = 0, shared_stats = 0;
  if (m.recompute == Recompute::kFull) {
    const int64_t R = m.recompute_num_layers == 0 ? L : std::min(m.recompute_num_layers, L);
    kept_values = R * H + (L - R) * layer_values;
    kept_stats = (L - R) * layer_stats;
    shared_values = layer_values - H;
    shared_stats = layer_stats;
  } else if (m.recompute == Recompute::kSelective) {
    const int64_t cheap_values = 2 * H + F, cheap_stats = 2 * norm_stats;
    kept_values = L * (layer_values - cheap_values);
    kept_stats = L * (layer_stats - cheap_stats);
    shared_values = cheap_values;
    shared_stats = cheap_stats;
  }
  s.activation_bytes = N * (compute_size * (kept_values + shared_values + final_values) +
                            4 * (kept_stats + shared_stats + final_stats));

  s.total_bytes = s.weight_bytes + s.grad_bytes + s.main_param_bytes + s.optimizer_bytes + s.activation_bytes;
  return s;
}

std::string format_model_stats(const ModelStats& s, Device device) {
  std::string out;
  const auto line = [&](const std::string& k, const std::string& v) { out += fmt::format("  {:<28}{}\n", k, v); };
  out += "parameters\n";
  line("total", fmt::format("{} ({})", count_str(s.num_params), with_commas(s.num_params)));
  line("embedding", fmt::format("{} ({})", count_str(s.embedding_params), with_commas(s.embedding_params)));
  line("non-embedding", fmt::format("{} ({})", count_str(s.non_embedding_params),
                                    with_commas(s.non_embedding_params)));
  line("in GEMMs (incl. LM head)", fmt::format("{} ({})", count_str(s.matmul_params), with_commas(s.matmul_params)));
  out += "compute (training, fwd+bwd)\n";
  line("FLOPs/token", fmt::format("{}  (6 × GEMM parameters {} + attention {})", flops_str(s.flops_per_token),
                                  flops_str(s.matmul_flops_per_token), flops_str(s.attention_flops_per_token)));
  line("tokens/iteration", with_commas(s.tokens_per_iter));
  line("FLOPs/iteration", flops_str(s.flops_per_iter));
  out += fmt::format("memory of one process holding the whole model ({}{})\n", precision_name(s.precision),
                     device == Device::kCpu ? "" : ", in GPU memory");
  line(fmt::format("weights ({})", precision_name(s.precision)), format_bytes(s.weight_bytes));
  line("gradients (fp32)", format_bytes(s.grad_bytes));
  if (s.main_param_bytes > 0) line("main params (fp32)", format_bytes(s.main_param_bytes));
  line("AdamW moments (fp32)", format_bytes(s.optimizer_bytes));
  line("activations (1 micro-batch)", format_bytes(s.activation_bytes));
  line("total", format_bytes(s.total_bytes));
  return out;
}

RankMemory rank_memory(const ModelStats& s, int tensor, int pipeline, int data, bool distributed_optimizer) {
  const int64_t model_split = int64_t{tensor} * pipeline;
  const bool sharded = distributed_optimizer && data > 1;
  const int64_t state_split = model_split * (sharded ? data : 1);
  RankMemory r;
  r.weight_bytes = s.weight_bytes / model_split;
  r.grad_bytes = s.grad_bytes / model_split;
  // bf16: the master weights shard with the moments; fp32 weights are their own master shard (buckets
  // that reduce in place, the usual case: see memory_plan.h for the exact plan).
  r.main_param_bytes = s.main_param_bytes / state_split;
  r.optimizer_bytes = s.optimizer_bytes / state_split;
  r.activation_bytes = s.activation_bytes / model_split;
  r.total_bytes = r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes + r.activation_bytes;
  const double params = static_cast<double>(s.num_params) / static_cast<double>(model_split);
  r.bytes_per_param =
      params > 0 ? static_cast<double>(r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes) / params
                 : 0.0;
  return r;
}

}  // namespace lattice
