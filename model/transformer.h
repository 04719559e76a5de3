// Transformer: the whole decoder-only language model on one process (embeddings, decoder layers,
// final norm, LM head, softmax cross-entropy) — one ModelChunk holding everything, one activation
// slot. Evaluation, tests and the one-process paths use it.
#pragma once

#include "kernels/tensor.h"
#include "model/model_chunk.h"
#include "model/model_config.h"
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

  // The logits f32[B*T, V] of the last forward (backward overwrites them with their gradient).
  const Tensor& logits() const { return chunk_.head_logits(0); }

  int64_t micro_batch_size() const { return batch_; }
  const ModelConfig& config() const { return config_; }
  ModelChunk& chunk() { return chunk_; }

 private:
  ModelConfig config_;
  int64_t batch_;
  ModelChunk chunk_;
  Tensor none_;  // the unused input/output/gradient arguments of a whole-model chunk
};

}  // namespace lattice
