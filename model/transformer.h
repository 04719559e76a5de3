// Transformer: the whole decoder-only language model (embeddings, decoder layers, final norm,
// LM head, softmax cross-entropy) with explicit forward and backward over one micro-batch.
// Activation memory is allocated once at construction for a fixed micro-batch shape.
#pragma once

#include <vector>

#include "kernels/tensor.h"
#include "model/activations.h"
#include "model/decoder_layer.h"
#include "model/model_config.h"
#include "model/norm.h"
#include "model/parameter_store.h"

namespace lattice {

class Transformer {
 public:
  Transformer(const ModelConfig& config, ParameterStore& params, int64_t micro_batch_size);

  // ids, targets: i32[B, T]. token_losses: f32[B*T] receives -log p(target) per token.
  void forward(const Tensor& ids, const Tensor& targets, Tensor& token_losses);
  // Gradients of (grad_scale * sum of token losses) accumulate into the store's grads. There is
  // one activation slot: backward() must follow the forward() of the same micro-batch with no
  // other forward in between (evaluation is forward() alone).
  void backward(const Tensor& ids, const Tensor& targets, float grad_scale);

  int64_t micro_batch_size() const { return batch_; }
  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  int64_t batch_;
  std::vector<DecoderLayer> layers_;
  Norm final_norm_;
  Tensor word_embeddings_, word_embeddings_grad_;
  Tensor position_embeddings_, position_embeddings_grad_;
  Tensor head_, head_grad_;  // the LM head weight: word embeddings when tied

  // Saved activations (one micro-batch slot) and scratch, allocated once.
  std::vector<LayerActivations> saved_;
  Tensor final_hidden_;       // [B, T, H] output of the last layer
  Tensor final_norm_out_;     // [B*T, H]
  NormSaved final_norm_saved_;
  Tensor logits_;             // [B*T, V]; overwritten by its gradient in backward
  Tensor loss_lse_;           // [B*T]
  Tensor d_hidden_;           // [B, T, H] gradient flowing down the residual stream
  Tensor d_final_norm_out_;   // [B*T, H]
  BackwardScratch scratch_;
};

}  // namespace lattice
