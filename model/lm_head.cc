// LmHead forward/backward.
#include "model/lm_head.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

LmHead::LmHead(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params, TensorParallel tp,
               int64_t micro_batch_size, int slots)
    : config_(config), layout_(layout), tp_(tp) {
  const int64_t H = config.hidden_size, tokens = micro_batch_size * config.seq_length;
  const int64_t local_tokens = layout.local_tokens(config, micro_batch_size);
  final_norm_ = Norm(params, "final_norm", config.norm, static_cast<float>(config.norm_eps));
  for (size_t i = 0; i < params.count(); ++i)
    if (params.spec(i).name.rfind("final_norm.", 0) == 0) param_indices_.push_back(i);
  const size_t h = params.index(config.tie_embeddings ? "embedding.word_embeddings.weight" : "lm_head.weight");
  head_ = params.value(h);
  head_grad_ = params.grad(h);
  // Tied on one pipeline rank: the embedding's backward (which runs later) reports the table.
  if (!config.tie_embeddings || layout.pp_size > 1) param_indices_.push_back(h);
  saved_.resize(static_cast<size_t>(slots));
  for (Saved& s : saved_) {
    s.hidden = Tensor::empty({local_tokens, H});
    s.norm_out = Tensor::empty({tokens, H});
    s.norm.allocate(tokens);
    s.logits = Tensor::empty({tokens, head_.dim(0)});
    s.lse = Tensor::empty({tokens});
  }
  d_norm_out_ = Tensor::empty({tokens, H});
}

void LmHead::forward(int slot, const Tensor& targets, Tensor& token_losses) {
  Saved& s = saved_.at(static_cast<size_t>(slot));
  final_norm_.forward(s.hidden, s.norm_out, s.norm);
  ops::matmul(s.norm_out, false, head_, true, s.logits);
  ops::cross_entropy_forward(s.logits, targets, token_losses, s.lse);
}

void LmHead::backward(int slot, const Tensor& targets, float grad_scale, Tensor& d_hidden) {
  Saved& s = saved_.at(static_cast<size_t>(slot));
  // The logits buffer becomes its own gradient.
  ops::cross_entropy_backward(s.logits, targets, s.lse, grad_scale, s.logits);
  ops::matmul(s.logits, true, s.norm_out, false, head_grad_, 1.0f, 1.0f);
  ops::matmul(s.logits, false, head_, false, d_norm_out_);
  final_norm_.backward(d_norm_out_, s.hidden, s.norm, d_hidden);
}

}  // namespace lattice
