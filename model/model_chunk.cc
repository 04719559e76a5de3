// ModelChunk forward/backward.
#include "model/model_chunk.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

std::vector<int> activation_slot_pools(const ModelConfig& config, const ModelLayout& layout) {
  std::vector<int> pools(static_cast<size_t>(layout.num_chunks()));
  int shared = -1;  // the first chunk without the head: the pool its equals share
  for (int c = 0; c < layout.num_chunks(); ++c) {
    pools[c] = c;
    if (layout.has_head(c)) continue;
    if (shared < 0) shared = c;
    else if (layout.chunk_layers(config, c).count == layout.chunk_layers(config, shared).count) pools[c] = shared;
  }
  return pools;
}

ModelChunk::ModelChunk(const ModelConfig& config, const ModelLayout& layout, int chunk, ParameterStore& params,
                       TensorParallel tp, int64_t micro_batch_size, int slots, const ModelChunk* share_slots_with)
    : config_(config), layout_(layout), micro_batch_size_(micro_batch_size), slots_(slots), range_(layout.chunk_layers(config, chunk)) {
  LATTICE_CHECK(slots >= 1, "a model chunk needs at least one activation slot, got {}", slots);
  LATTICE_CHECK(range_.count >= 1, "virtual stage {} has no decoder layer", layout.virtual_stage(chunk));
  if (layout.has_embedding(chunk))
    embedding_ = std::make_unique<Embedding>(config_, layout_, params, tp, micro_batch_size);
  for (int64_t i = range_.first; i < range_.first + range_.count; ++i) {
    layers_.emplace_back(config_, layout_, params, tp, i);
    const std::string prefix = fmt::format("layers.{}.", i);
    std::vector<size_t> indices;
    for (size_t p = 0; p < params.count(); ++p)
      if (params.spec(p).name.rfind(prefix, 0) == 0) indices.push_back(p);
    layer_params_.push_back(std::move(indices));
  }
  if (layout.has_head(chunk))
    head_ = std::make_unique<LmHead>(config_, layout_, params, tp, micro_batch_size, slots);
  unsigned recomputed_groups = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    recomputed_groups |= LayerActivations::kAll & ~kept_groups(layer_recompute(i));
  if (share_slots_with != nullptr) {
    // The same layer count keeps the same groups per layer (layer_recompute counts within a chunk).
    LATTICE_CHECK(!head_ && !share_slots_with->head_ && share_slots_with->layers_.size() == layers_.size() &&
                      share_slots_with->slots_ == slots,
                  "chunk {} cannot share the activation slots of a chunk with the head, another layer count or "
                  "other slots ({} layers, {} slots; theirs {}, {})",
                  chunk, layers_.size(), slots, share_slots_with->layers_.size(), share_slots_with->slots_);
    saved_ = share_slots_with->saved_;
  } else {
    saved_ = std::make_shared<std::vector<std::vector<LayerActivations>>>(static_cast<size_t>(slots));
    for (auto& slot : *saved_) {
      slot.resize(layers_.size());
      for (size_t i = 0; i < layers_.size(); ++i)
        slot[i].allocate(params.context(), config_, layout_, micro_batch_size, params.param_dtype(),
                         kept_groups(layer_recompute(i)));
    }
  }
  recomputed_.allocate(params.context(), config_, layout_, micro_batch_size, params.param_dtype(), recomputed_groups);
  // Activations and their gradients in the parameters' compute dtype (bf16 under mixed precision).
  d_hidden_ = params.context().empty(activation_shape(), params.param_dtype());
  scratch_.allocate(params.context(), config_, layout_, micro_batch_size, params.param_dtype());
}

Recompute ModelChunk::layer_recompute(size_t i) const {
  const int64_t n = config_.recompute_num_layers;
  if (config_.recompute == Recompute::kFull && n > 0 && static_cast<int64_t>(i) >= n) return Recompute::kNone;
  return config_.recompute;
}

unsigned ModelChunk::kept_groups(Recompute mode) {
  if (mode == Recompute::kNone) return LayerActivations::kAll;
  return mode == Recompute::kSelective ? LayerActivations::kInput | LayerActivations::kCore : LayerActivations::kInput;
}

LayerActivations ModelChunk::layer_activations(int slot, size_t i) const {
  LayerActivations s = (*saved_)[static_cast<size_t>(slot)][i];
  s.share(recomputed_, LayerActivations::kAll & ~kept_groups(layer_recompute(i)));
  return s;
}

const Tensor& ModelChunk::head_logits(int slot) const {
  LATTICE_CHECK(head_ != nullptr, "this model chunk has no LM head");
  return head_->logits(slot);
}

Shape ModelChunk::activation_shape() const {
  return {layout_.local_tokens(config_, micro_batch_size_), config_.hidden_size};
}

void ModelChunk::forward(int slot, const Tensor& ids, const Tensor& targets, const Tensor& input, Tensor& output,
                         Tensor& token_losses, std::optional<float> loss_grad_scale) {
  LATTICE_CHECK(slot >= 0 && slot < slots_, "activation slot {} out of range [0, {})", slot, slots_);
  auto& saved = (*saved_)[static_cast<size_t>(slot)];
  if (embedding_) {
    params_needed(embedding_->parameter_indices());
    embedding_->forward(ids, saved[0].input);
  } else {
    ops::copy(input, saved[0].input);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    Tensor& out = i + 1 < layers_.size() ? saved[i + 1].input : head_ ? head_->input(slot) : output;
    params_needed(layer_params_[i]);
    LayerActivations s = layer_activations(slot, i);
    layers_[i].forward(s, scratch_, out);
  }
  if (head_) {
    params_needed(head_->parameter_indices());
    head_->forward(slot, targets, token_losses, loss_grad_scale);
  }
}

void ModelChunk::backward(int slot, const Tensor& ids, const Tensor& targets, const Tensor& grad_output,
                          float grad_scale, Tensor& grad_input) {
  LATTICE_CHECK(slot >= 0 && slot < slots_, "activation slot {} out of range [0, {})", slot, slots_);
  if (head_) {
    head_->backward(slot, targets, grad_scale, d_hidden_);
    grads_done(head_->parameter_indices());
  } else {
    ops::copy(grad_output, d_hidden_);
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    const Recompute mode = layer_recompute(i);
    LayerActivations s = layer_activations(slot, i);
    if (mode != Recompute::kNone) layers_[i].recompute(s, scratch_, mode);
    layers_[i].backward(d_hidden_, s, scratch_, d_hidden_);
    grads_done(layer_params_[i]);
  }
  if (embedding_) {
    embedding_->backward(ids, d_hidden_);
    grads_done(embedding_->parameter_indices());
  } else {
    ops::copy(d_hidden_, grad_input);
  }
}

}  // namespace lattice
