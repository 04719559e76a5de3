// Embedding forward/backward.
#include "model/embedding.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

Embedding::Embedding(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params,
                     TensorParallel tp, int64_t /*micro_batch_size*/)
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
}

void Embedding::forward(const Tensor& ids, Tensor& hidden) {
  Tensor x = hidden.view({ids.dim(0), ids.dim(1), config_.hidden_size});
  ops::embedding_forward(ids, word_, x);
  if (position_.defined()) ops::add_position_embedding(x, position_);
}

void Embedding::backward(const Tensor& ids, const Tensor& d_hidden) {
  Tensor dx = d_hidden.view({ids.dim(0), ids.dim(1), config_.hidden_size});
  ops::embedding_backward(ids, dx, word_grad_);
  if (position_.defined()) ops::position_embedding_backward(dx, position_grad_);
}

}  // namespace lattice
