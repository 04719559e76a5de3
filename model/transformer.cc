// Transformer forward/backward over one micro-batch.
#include "model/transformer.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

Transformer::Transformer(const ModelConfig& config, ParameterStore& params, int64_t micro_batch_size)
    : config_(config), batch_(micro_batch_size) {
  const int64_t B = batch_, T = config.seq_length, H = config.hidden_size, V = config.vocab_size;
  for (int64_t i = 0; i < config.num_layers; ++i) layers_.emplace_back(config_, params, i);
  final_norm_ = Norm(params, "final_norm", config.norm, static_cast<float>(config.norm_eps));
  word_embeddings_ = params.value("embedding.word_embeddings.weight");
  word_embeddings_grad_ = params.grad("embedding.word_embeddings.weight");
  if (config.position_embedding == PositionEmbedding::kLearned) {
    position_embeddings_ = params.value("embedding.position_embeddings.weight");
    position_embeddings_grad_ = params.grad("embedding.position_embeddings.weight");
  }
  const std::string head = config.tie_embeddings ? "embedding.word_embeddings.weight" : "lm_head.weight";
  head_ = params.value(head);
  head_grad_ = params.grad(head);

  saved_.resize(config.num_layers);
  for (auto& s : saved_) s.allocate(config, B);
  final_hidden_ = Tensor::empty({B, T, H});
  final_norm_out_ = Tensor::empty({B * T, H});
  final_norm_saved_.allocate(B * T);
  logits_ = Tensor::empty({B * T, V});
  loss_lse_ = Tensor::empty({B * T});
  d_hidden_ = Tensor::empty({B, T, H});
  d_final_norm_out_ = Tensor::empty({B * T, H});
  scratch_.allocate(config, B);
}

void Transformer::forward(const Tensor& ids, const Tensor& targets, Tensor& token_losses) {
  LATTICE_CHECK(ids.shape() == Shape({batch_, config_.seq_length}) && targets.shape() == ids.shape(),
                "micro-batch ids {} / targets {} do not match [{}, {}]", ids.describe(), targets.describe(), batch_,
                config_.seq_length);
  Tensor& x0 = saved_.empty() ? final_hidden_ : saved_[0].input;
  ops::embedding_forward(ids, word_embeddings_, x0);
  if (position_embeddings_.defined()) ops::add_position_embedding(x0, position_embeddings_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Tensor& out = i + 1 < layers_.size() ? saved_[i + 1].input : final_hidden_;
    layers_[i].forward(saved_[i], out);
  }
  final_norm_.forward(final_hidden_, final_norm_out_, final_norm_saved_);
  ops::matmul(final_norm_out_, false, head_, true, logits_);
  ops::cross_entropy_forward(logits_, targets, token_losses, loss_lse_);
}

void Transformer::backward(const Tensor& ids, const Tensor& targets, float grad_scale) {
  // The logits buffer becomes its own gradient.
  ops::cross_entropy_backward(logits_, targets, loss_lse_, grad_scale, logits_);
  ops::matmul(logits_, true, final_norm_out_, false, head_grad_, 1.0f, 1.0f);
  ops::matmul(logits_, false, head_, false, d_final_norm_out_);
  final_norm_.backward(d_final_norm_out_, final_hidden_, final_norm_saved_, d_hidden_);
  for (size_t i = layers_.size(); i-- > 0;) layers_[i].backward(d_hidden_, saved_[i], scratch_, d_hidden_);
  ops::embedding_backward(ids, d_hidden_, word_embeddings_grad_);
  if (position_embeddings_.defined()) ops::position_embedding_backward(d_hidden_, position_embeddings_grad_);
}

}  // namespace lattice
