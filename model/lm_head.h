// LmHead: final norm, LM head projection and softmax cross-entropy — what the last pipeline stage
// runs after its layers. hidden [tokens, H] -> per-token losses f32[B·T]. Keeps what backward
// needs per activation slot (one slot per micro-batch in flight on this chunk).
// Tensor-parallel: the head is vocab-parallel (this rank's [Vp/tp, H] rows, the same shard as
// the tied word embeddings), fed like a column-parallel layer (copy-to-region, or SP gather of
// the normed tokens). The cross-entropy combines the ranks' logits without gathering them: the
// row max and the sums of exponentials and target logits are all-reduced (padding columns never
// count); every tp rank gets all B·T token losses.
#pragma once

#include <optional>
#include <vector>

#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/norm.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

class LmHead {
 public:
  LmHead() = default;
  LmHead(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params, TensorParallel tp,
         int64_t micro_batch_size, int slots);

  // The head's input [tokens, H] for `slot`: the last layer writes its output here.
  Tensor& input(int slot) { return saved_.at(static_cast<size_t>(slot)).hidden; }
  // Runs on input(slot). With grad_scale (training: the backward's), the loss's gradient is computed
  // with the loss, into the logits buffer (ops::cross_entropy_forward_backward, the fused
  // classifier: one pass over the logits instead of three); tensor-parallel heads compute it in
  // backward as before, their softmax statistics being all-reduced in between.
  void forward(int slot, const Tensor& targets, Tensor& token_losses,
               std::optional<float> grad_scale = std::nullopt);
  // Gradients of (grad_scale × sum of token losses): head/norm gradients accumulated, d_hidden
  // [tokens, H] overwritten. A forward that took a grad_scale must have taken this one.
  void backward(int slot, const Tensor& targets, float grad_scale, Tensor& d_hidden);

  const std::vector<size_t>& parameter_indices() const { return param_indices_; }
  // The logits [B·T, Vp/tp] of `slot`'s last forward without a grad_scale, until its backward
  // overwrites them.
  const Tensor& logits(int slot) const { return saved_.at(static_cast<size_t>(slot)).logits; }

 private:
  struct Saved {
    Tensor hidden;    // [tokens, H]
    Tensor norm_out;  // [B·T, H] (gathered under SP)
    NormSaved norm;   // [tokens]
    Tensor logits;    // [B·T, Vp/tp]; overwritten by its gradient
    Tensor lse;       // [B·T]
    // The grad_scale of the gradient the logits buffer holds already (a fused forward), if any.
    std::optional<float> logits_grad_scale;
  };

  ModelConfig config_;
  ModelLayout layout_;
  TensorParallel tp_;
  Norm final_norm_;
  Tensor head_, head_grad_;  // the word embeddings when tied
  int64_t first_col_ = 0;    // vocabulary index of the local head's row 0
  int64_t valid_cols_ = 0;   // rows of the local head that are real vocabulary (the rest padding)
  std::vector<Saved> saved_;
  Tensor d_norm_out_;  // [B·T, H]
  // tp > 1 only: the cross-entropy's all-reduced statistics, and under SP the local norm output
  // before the gather and its gradient after the reduce-scatter.
  Tensor row_max_;     // [B·T]
  Tensor sums_;        // [2, B·T]
  Tensor norm_local_;  // [tokens, H]
  std::vector<size_t> param_indices_;
};

}  // namespace lattice
