// Embedding forward/backward. Token ids come checked against the vocabulary from the host (StepBatches,
// TextGenerator), so the ops here take them as ops::Ids::kChecked: no read-back in the step.
#include "model/embedding.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

Embedding::Embedding(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params,
                     TensorParallel tp, int64_t micro_batch_size)
    : config_(config), layout_(layout), tp_(tp) {
  const size_t w = params.index("embedding.word_embeddings.weight");
  word_ = params.value(w);
  word_grad_ = params.grad(w);
  param_indices_.push_back(w);
  if (config.position_embedding == PositionEmbedding::kLearned) {
    const size_t p = params.index("embedding.position_embeddings.weight");
    position_ = params.value(p);
    position_grad_ = params.grad(p);
    param_indices_.push_back(p);
  }
  first_row_ = layout.tp_rank * layout.vocab_rows_per_rank(config);
  LATTICE_CHECK(word_.dim(0) == layout.vocab_rows_per_rank(config), "word table {} does not hold {} rows per tp rank",
                word_.describe(), layout.vocab_rows_per_rank(config));
  const int64_t local = layout.local_tokens(config, micro_batch_size);
  if (layout.sequence_parallel) {
    first_token_ = layout.tp_rank * local;
    full_ = params.context().empty({micro_batch_size * config.seq_length, config.hidden_size}, params.param_dtype());
  }
}

void Embedding::forward(const Tensor& ids, Tensor& hidden) {
  const int64_t T = config_.seq_length;
  if (tp_.size() == 1) {
    Tensor x = hidden.view({ids.dim(0), ids.dim(1), config_.hidden_size});
    ops::embedding_forward(ids, word_, x, ops::Ids::kChecked);
    if (position_.defined()) ops::add_position_embedding(x, position_);
    return;
  }
  if (tp_.sequence_parallel) {
    ops::embedding_forward_shard(ids, word_, first_row_, config_.vocab_size, full_, ops::Ids::kChecked);
    reduce_scatter_tokens_forward(tp_, full_, hidden);
  } else {
    ops::embedding_forward_shard(ids, word_, first_row_, config_.vocab_size, hidden, ops::Ids::kChecked);
    reduce_from_tp_region_forward(tp_, hidden);
  }
  if (position_.defined()) ops::add_position_embedding(hidden, position_, T, first_token_);
}

void Embedding::backward(const Tensor& ids, const Tensor& d_hidden) {
  const int64_t T = config_.seq_length;
  if (tp_.size() == 1) {
    Tensor dx = d_hidden.view({ids.dim(0), ids.dim(1), config_.hidden_size});
    ops::embedding_backward(ids, dx, word_grad_, ops::Ids::kChecked);
    if (position_.defined()) ops::position_embedding_backward(dx, position_grad_);
    return;
  }
  // Positions from the local tokens (under SP a partial sum, completed over tp by
  // the trainer's GradSync); the word rows of this rank from every token.
  if (position_.defined()) ops::position_embedding_backward(d_hidden, T, first_token_, position_grad_);
  const Tensor* d_all = &d_hidden;
  if (tp_.sequence_parallel) {
    reduce_scatter_tokens_backward(tp_, d_hidden, full_);
    d_all = &full_;
  }
  ops::embedding_backward_shard(ids, *d_all, first_row_, config_.vocab_size, word_grad_, ops::Ids::kChecked);
}

}  // namespace lattice
