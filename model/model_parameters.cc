// Builds the parameter list of the decoder from its config.
#include "model/model_parameters.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/error.h"

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

// How this rank's tensor-parallel shard cuts a parameter. tp = 1 leaves every spec whole.
struct Shard {
  int rank = 0;
  int size = 1;

  // The same on every tp rank: tp rank 0 owns it, the others hold replicas.
  ParamSpec duplicated(ParamSpec s) const {
    if (size == 1) return s;
    s.tp_duplicated = true;
    s.replica = rank > 0;
    return s;
  }
  // Split along dim `d` into `size` equal contiguous parts; this rank holds part `rank`.
  ParamSpec split(ParamSpec s, size_t d) const {
    if (size == 1) return s;
    s.global_shape = s.shape;
    s.offset = Shape(s.shape.size(), 0);
    s.shape[d] /= size;
    s.offset[d] = rank * s.shape[d];
    return s;
  }
};

void add_norm(std::vector<ParamSpec>& specs, const ModelConfig& c, const Shard& tp, const std::string& prefix) {
  specs.push_back(tp.duplicated(ones(prefix + ".weight", {c.hidden_size})));
  if (c.norm == NormKind::kLayerNorm && c.bias) specs.push_back(tp.duplicated(zeros(prefix + ".bias", {c.hidden_size})));
}

// Column-parallel: output features (weight rows, bias) split over tp.
void add_column_linear(std::vector<ParamSpec>& specs, const ModelConfig& c, const Shard& tp, const std::string& prefix,
                       int64_t out, int64_t in, float std) {
  specs.push_back(tp.split(matrix(prefix + ".weight", {out, in}, std), 0));
  if (c.bias) specs.push_back(tp.split(zeros(prefix + ".bias", {out}), 0));
}

// Row-parallel: input features (weight columns) split over tp; the bias is added after the
// reduction, so it is whole and the same on every rank.
void add_row_linear(std::vector<ParamSpec>& specs, const ModelConfig& c, const Shard& tp, const std::string& prefix,
                    int64_t out, int64_t in, float std) {
  specs.push_back(tp.split(matrix(prefix + ".weight", {out, in}, std), 1));
  if (c.bias) specs.push_back(tp.duplicated(zeros(prefix + ".bias", {out})));
}

// Vocab-parallel [V, H] table: the vocabulary padded to Vp rows (ModelLayout::padded_vocab_size),
// rank r holds rows [r·Vp/tp, (r+1)·Vp/tp); the part past V is zero padding (possibly all of it).
ParamSpec vocab_table(const ModelConfig& c, const ModelLayout& layout, std::string name, float std) {
  ParamSpec s = matrix(std::move(name), {c.vocab_size, c.hidden_size}, std);
  if (layout.tp_size == 1) return s;
  const int64_t rows = layout.vocab_rows_per_rank(c), first = layout.tp_rank * rows;
  s.global_shape = s.shape;
  s.shape = {rows, c.hidden_size};
  s.offset = {first, 0};
  s.box = {std::clamp<int64_t>(c.vocab_size - first, 0, rows), c.hidden_size};
  return s;
}

void check_divisible(const ModelConfig& c, int tp) {
  auto need = [tp](int64_t value, const char* field) {
    if (value % tp != 0) {
      throw InputError(fmt::format("tensor parallelism: {} = {} is not divisible by parallel.tensor = {} (each tp "
                                   "rank holds an equal share); choose a tensor degree that divides it",
                                   field, value, tp));
    }
  };
  need(c.num_attention_heads, "model.num_attention_heads");
  need(c.num_kv_heads, "model.num_kv_heads");
  need(c.ffn_hidden_size, "model.ffn_hidden_size");
}

}  // namespace

std::vector<ParamSpec> model_parameter_specs(const ModelConfig& c) { return model_parameter_specs(c, ModelLayout{}); }

std::vector<ParamSpec> model_parameter_specs(const ModelConfig& c, const ModelLayout& layout) {
  LATTICE_CHECK(layout.tp_size >= 1 && layout.tp_rank >= 0 && layout.tp_rank < layout.tp_size,
                "tp rank {} of tp size {}", layout.tp_rank, layout.tp_size);
  check_divisible(c, layout.tp_size);
  const Shard tp{layout.tp_rank, layout.tp_size};
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
    specs.push_back(vocab_table(c, layout, "embedding.word_embeddings.weight", std));
    if (c.position_embedding == PositionEmbedding::kLearned)
      specs.push_back(tp.duplicated(matrix("embedding.position_embeddings.weight", {c.seq_length, H}, std)));
  }
  for (const int64_t i : layers) {
    const std::string p = fmt::format("layers.{}.", i);
    // Heads are split contiguously: q head h is rows [h·D, (h+1)·D) of q_proj, so tp rank r holds
    // q heads [r·Hq/tp, (r+1)·Hq/tp) and kv heads [r·Hkv/tp, (r+1)·Hkv/tp) — the kv heads its
    // q heads read under GQA.
    add_norm(specs, c, tp, p + "input_norm");
    add_column_linear(specs, c, tp, p + "attention.q_proj", c.num_attention_heads * D, H, std);
    add_column_linear(specs, c, tp, p + "attention.k_proj", c.num_kv_heads * D, H, std);
    add_column_linear(specs, c, tp, p + "attention.v_proj", c.num_kv_heads * D, H, std);
    add_row_linear(specs, c, tp, p + "attention.o_proj", H, c.num_attention_heads * D, out_std);
    add_norm(specs, c, tp, p + "post_attention_norm");
    if (c.activation == Activation::kSwiglu) add_column_linear(specs, c, tp, p + "mlp.gate_proj", F, H, std);
    add_column_linear(specs, c, tp, p + "mlp.up_proj", F, H, std);
    add_row_linear(specs, c, tp, p + "mlp.down_proj", H, F, out_std);
  }
  if (last) {
    add_norm(specs, c, tp, "final_norm");
    if (!c.tie_embeddings) {
      specs.push_back(vocab_table(c, layout, "lm_head.weight", std));
    } else if (!first) {
      // The tied head on the last stage: the same values as the first stage's table (same name,
      // so the same init), kept equal by summing the two gradients over the embedding group.
      ParamSpec head = vocab_table(c, layout, "embedding.word_embeddings.weight", std);
      head.replica = true;
      specs.push_back(head);
    }
  }
  return specs;
}

}  // namespace lattice
