// LmHead forward/backward. Targets come checked against the vocabulary from the host (StepBatches), so
// the loss ops take them as ops::Ids::kChecked: no read-back in the step.
#include "model/lm_head.h"

#include <algorithm>

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
  const int64_t rows = layout.vocab_rows_per_rank(config);
  LATTICE_CHECK(head_.dim(0) == rows, "LM head {} does not hold {} rows per tp rank", head_.describe(), rows);
  first_col_ = layout.tp_rank * rows;
  valid_cols_ = std::clamp<int64_t>(config.vocab_size - first_col_, 0, rows);
  // Tied on one pipeline rank: the embedding's backward (which runs later) reports the table.
  if (!config.tie_embeddings || layout.pp_size > 1) param_indices_.push_back(h);
  // Hidden states, logits and their gradients in the compute dtype; the softmax statistics in f32.
  const DeviceContext& ctx = params.context();
  const DType dtype = params.param_dtype();
  saved_.resize(static_cast<size_t>(slots));
  for (Saved& s : saved_) {
    s.hidden = ctx.empty({local_tokens, H}, dtype);
    s.norm_out = ctx.empty({tokens, H}, dtype);
    s.norm.allocate(ctx, local_tokens);
    s.logits = ctx.empty({tokens, rows}, dtype);
    s.lse = ctx.empty({tokens});
  }
  d_norm_out_ = ctx.empty({tokens, H}, dtype);
  if (tp.size() > 1) {
    row_max_ = ctx.empty({tokens});
    sums_ = ctx.empty({2, tokens});
  }
  if (layout.sequence_parallel) norm_local_ = ctx.empty({local_tokens, H}, dtype);
}

void LmHead::forward(int slot, const Tensor& targets, Tensor& token_losses, std::optional<float> grad_scale) {
  Saved& s = saved_.at(static_cast<size_t>(slot));
  s.logits_grad_scale.reset();
  if (tp_.sequence_parallel) {
    final_norm_.forward(s.hidden, norm_local_, s.norm);
    gather_tokens_forward(tp_, norm_local_, s.norm_out);
  } else {
    final_norm_.forward(s.hidden, s.norm_out, s.norm);
    copy_to_tp_region_forward(tp_, s.norm_out);  // identity
  }
  ops::matmul(s.norm_out, false, head_, true, s.logits);
  if (tp_.size() == 1) {
    if (grad_scale) {
      // The logits buffer becomes its own gradient now, in the pass that computes the loss.
      ops::cross_entropy_forward_backward(s.logits, targets, *grad_scale, token_losses, s.lse, s.logits,
                                          ops::Ids::kChecked);
      s.logits_grad_scale = grad_scale;
    } else {
      ops::cross_entropy_forward(s.logits, targets, token_losses, s.lse, ops::Ids::kChecked);
    }
    return;
  }
  // Vocab-parallel softmax: global row max, then the sums of exponentials and the target logit
  // (owned by exactly one rank) in one all-reduce.
  ops::cross_entropy_shard_max(s.logits, valid_cols_, row_max_);
  tp_.group->all_reduce_async(row_max_, ReduceOp::kMax).wait_on(tp_.stream);
  ops::cross_entropy_shard_sums(s.logits, targets, row_max_, first_col_, valid_cols_, config_.vocab_size, sums_,
                                ops::Ids::kChecked);
  tp_.group->all_reduce_async(sums_).wait_on(tp_.stream);
  ops::cross_entropy_shard_loss(row_max_, sums_, token_losses, s.lse);
}

void LmHead::backward(int slot, const Tensor& targets, float grad_scale, Tensor& d_hidden) {
  Saved& s = saved_.at(static_cast<size_t>(slot));
  // The logits buffer becomes its own gradient (unless the forward made it so already).
  if (s.logits_grad_scale) {
    LATTICE_CHECK(*s.logits_grad_scale == grad_scale,
                  "LM head slot {}: the forward computed the loss gradient at grad_scale {}, the backward asks {}",
                  slot, *s.logits_grad_scale, grad_scale);
    s.logits_grad_scale.reset();
  } else if (tp_.size() == 1) {
    ops::cross_entropy_backward(s.logits, targets, s.lse, grad_scale, s.logits, ops::Ids::kChecked);
  } else {
    ops::cross_entropy_shard_backward(s.logits, targets, s.lse, grad_scale, first_col_, valid_cols_,
                                      config_.vocab_size, s.logits, ops::Ids::kChecked);
  }
  ops::matmul(s.logits, false, head_, false, d_norm_out_);  // partial over this rank's vocabulary
  {
    // The norm output's gradient is reduced over tp while the head's gradient is computed.
    CommHandle reduce = tp_.sequence_parallel ? gather_tokens_backward_async(tp_, d_norm_out_, norm_local_)
                                              : copy_to_tp_region_backward_async(tp_, d_norm_out_);
    ops::matmul(s.logits, true, s.norm_out, false, head_grad_, 1.0f, 1.0f);
    reduce.wait_on(tp_.stream);
  }
  final_norm_.backward(tp_.sequence_parallel ? norm_local_ : d_norm_out_, s.hidden, s.norm, d_hidden);
}

}  // namespace lattice
