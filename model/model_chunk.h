// ModelChunk: the part of the model one pipeline chunk (virtual stage) runs — the embedding when
// it is virtual stage 0, a contiguous range of decoder layers, the final norm + head + loss when
// it is the last — with explicit forward/backward per micro-batch and one activation slot per
// micro-batch in flight. One process runs the whole model as a single chunk. Under activation
// recomputation (model.recompute) a slot keeps only part of each layer's activations and
// backward recomputes the rest into one per-chunk set, layer by layer.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/tensor.h"
#include "model/activations.h"
#include "model/decoder_layer.h"
#include "model/embedding.h"
#include "model/lm_head.h"
#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

// The activation-slot pools of a rank's chunks (ActivationSlots::pool, each named by its first
// chunk): the chunks without the LM head share one when they hold the same number of layers (their
// saved activations are the same tensors); the head's chunk (its per-slot logits) and chunks of
// another size keep their own.
std::vector<int> activation_slot_pools(const ModelConfig& config, const ModelLayout& layout);

class ModelChunk {
 public:
  // `slots`: how many micro-batches may be between their forward and backward on this chunk at
  // once (the schedule's in-flight count); activation memory for that many is allocated now.
  // `share_slots_with`: another chunk of this rank whose slots this one uses (same layer count, no
  // LM head on either; `slots` must be its count): the two never hold more micro-batches at once
  // than the slots (ActivationSlots' pools), and allocating both would double them.
  ModelChunk(const ModelConfig& config, const ModelLayout& layout, int chunk, ParameterStore& params,
             TensorParallel tp, int64_t micro_batch_size, int slots, const ModelChunk* share_slots_with = nullptr);
  ModelChunk(const ModelChunk&) = delete;
  ModelChunk& operator=(const ModelChunk&) = delete;

  bool has_embedding() const { return embedding_ != nullptr; }
  bool has_head() const { return head_ != nullptr; }
  int slots() const { return slots_; }
  LayerRange layers() const { return range_; }
  // What flows between chunks: the residual stream [local tokens, H].
  Shape activation_shape() const;
  DType activation_dtype() const { return d_hidden_.dtype(); }  // the parameters' compute dtype
  // Last chunk: the head's logits of `slot` (LmHead::logits).
  const Tensor& head_logits(int slot) const;

  // ids, targets: i32[B, T]. First chunk: reads ids (input unused); else input is the previous
  // chunk's output (copied). Last chunk: writes token_losses f32[B·T] (output unused); else writes
  // output [local tokens, H]. loss_grad_scale: the grad_scale the micro-batch's backward will take,
  // when one follows (training), so that the last chunk's head computes the loss's gradient with
  // the loss (LmHead::forward); none for a forward alone.
  void forward(int slot, const Tensor& ids, const Tensor& targets, const Tensor& input, Tensor& output,
               Tensor& token_losses, std::optional<float> loss_grad_scale = std::nullopt);
  // Last chunk: the gradient of (grad_scale × sum of its token losses) (grad_output unused); else
  // grad_output is d loss / d output. First chunk: embedding gradients accumulated (grad_input
  // unused); else d loss / d input written to grad_input. Parameter gradients accumulate.
  void backward(int slot, const Tensor& ids, const Tensor& targets, const Tensor& grad_output, float grad_scale,
                Tensor& grad_input);

  // Called during backward each time a component (head, a layer, the embedding) has added its
  // gradients for this micro-batch, with the store indices of its parameters: the hook through
  // which data parallelism starts reducing gradients while backward goes on.
  using GradsDoneHook = std::function<void(const std::vector<size_t>& param_indices)>;
  void set_grads_done_hook(GradsDoneHook hook) { hook_ = std::move(hook); }
  // Called during forward right before a component (embedding, a layer, the head) reads its
  // parameters, with their store indices: where the distributed optimizer's parameter all-gather
  // of the previous step is waited for piece by piece (overlap_param_gather).
  using ParamsNeededHook = std::function<void(const std::vector<size_t>& param_indices)>;
  void set_params_needed_hook(ParamsNeededHook hook) { params_needed_hook_ = std::move(hook); }

 private:
  void grads_done(const std::vector<size_t>& indices) const {
    if (hook_) hook_(indices);
  }
  void params_needed(const std::vector<size_t>& indices) const {
    if (params_needed_hook_) params_needed_hook_(indices);
  }

  // How layer i (of this chunk) is recomputed, and the LayerActivations groups it keeps per slot.
  Recompute layer_recompute(size_t i) const;
  static unsigned kept_groups(Recompute mode);
  // Layer i's activations of `slot`: what the slot keeps, the rest in the shared recomputed set.
  LayerActivations layer_activations(int slot, size_t i) const;

  ModelConfig config_;
  ModelLayout layout_;
  int64_t micro_batch_size_;
  int slots_;
  LayerRange range_;
  std::unique_ptr<Embedding> embedding_;
  std::vector<DecoderLayer> layers_;
  std::vector<std::vector<size_t>> layer_params_;
  std::unique_ptr<LmHead> head_;
  // [slot][layer]; shared with the chunks of the same activation-slot pool.
  std::shared_ptr<std::vector<std::vector<LayerActivations>>> saved_;
  LayerActivations recomputed_;                       // what backward recomputes (no input)
  Tensor d_hidden_;                                   // [local tokens, H]
  LayerScratch scratch_;
  GradsDoneHook hook_;
  ParamsNeededHook params_needed_hook_;
};

}  // namespace lattice
