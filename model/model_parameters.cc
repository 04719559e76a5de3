// Builds the parameter list of the decoder from its config.
#include "model/model_parameters.h"

#include <cmath>

#include <fmt/format.h>

namespace lattice {

namespace {

ParamSpec matrix(std::string name, Shape shape, float std) {
  return ParamSpec{std::move(name), std::move(shape), InitKind::kNormal, std, /*weight_decay=*/true};
}
ParamSpec zeros(std::string name, Shape shape) {
  return ParamSpec{std::move(name), std::move(shape), InitKind::kZeros, 0.0f, false};
}
ParamSpec ones(std::string name, Shape shape) {
  return ParamSpec{std::move(name), std::move(shape), InitKind::kOnes, 0.0f, false};
}

void add_norm(std::vector<ParamSpec>& specs, const ModelConfig& c, const std::string& prefix) {
  specs.push_back(ones(prefix + ".weight", {c.hidden_size}));
  if (c.norm == NormKind::kLayerNorm && c.bias) specs.push_back(zeros(prefix + ".bias", {c.hidden_size}));
}

void add_linear(std::vector<ParamSpec>& specs, const ModelConfig& c, const std::string& prefix, int64_t out,
                int64_t in, float std) {
  specs.push_back(matrix(prefix + ".weight", {out, in}, std));
  if (c.bias) specs.push_back(zeros(prefix + ".bias", {out}));
}

}  // namespace

std::vector<ParamSpec> model_parameter_specs(const ModelConfig& c) { return model_parameter_specs(c, ModelLayout{}); }

std::vector<ParamSpec> model_parameter_specs(const ModelConfig& c, const ModelLayout& layout) {
  const float std = static_cast<float>(c.init_std);
  // Residual output projections are scaled down so the residual stream's variance does not grow
  // with depth (GPT-2 / Megatron).
  const float out_std = static_cast<float>(c.init_std / std::sqrt(2.0 * c.num_layers));
  const int64_t H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size;
  bool first = false, last = false;
  std::vector<int64_t> layers;  // this rank's, in model order (chunk c's layers precede chunk c+1's)
  for (int chunk = 0; chunk < layout.num_chunks(); ++chunk) {
    first = first || layout.has_embedding(chunk);
    last = last || layout.has_head(chunk);
    const LayerRange r = layout.chunk_layers(c, chunk);
    for (int64_t i = r.first; i < r.first + r.count; ++i) layers.push_back(i);
  }
  std::vector<ParamSpec> specs;
  if (first) {
    specs.push_back(matrix("embedding.word_embeddings.weight", {c.vocab_size, H}, std));
    if (c.position_embedding == PositionEmbedding::kLearned)
      specs.push_back(matrix("embedding.position_embeddings.weight", {c.seq_length, H}, std));
  }
  for (const int64_t i : layers) {
    const std::string p = fmt::format("layers.{}.", i);
    add_norm(specs, c, p + "input_norm");
    add_linear(specs, c, p + "attention.q_proj", c.num_attention_heads * D, H, std);
    add_linear(specs, c, p + "attention.k_proj", c.num_kv_heads * D, H, std);
    add_linear(specs, c, p + "attention.v_proj", c.num_kv_heads * D, H, std);
    add_linear(specs, c, p + "attention.o_proj", H, c.num_attention_heads * D, out_std);
    add_norm(specs, c, p + "post_attention_norm");
    if (c.activation == Activation::kSwiglu) add_linear(specs, c, p + "mlp.gate_proj", F, H, std);
    add_linear(specs, c, p + "mlp.up_proj", F, H, std);
    add_linear(specs, c, p + "mlp.down_proj", H, F, out_std);
  }
  if (last) {
    add_norm(specs, c, "final_norm");
    if (!c.tie_embeddings) {
      specs.push_back(matrix("lm_head.weight", {c.vocab_size, H}, std));
    } else if (!first) {
      // The tied head on the last stage: the same values as the first stage's table (same name,
      // so the same init), kept equal by summing the two gradients over the embedding group.
      ParamSpec head = matrix("embedding.word_embeddings.weight", {c.vocab_size, H}, std);
      head.replica = true;
      specs.push_back(head);
    }
  }
  return specs;
}

}  // namespace lattice
