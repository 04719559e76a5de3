// Embedding: token (and learned position) embeddings, the first thing the first pipeline stage
// runs. ids i32[B, T] -> hidden [tokens, H] (the residual stream entering layer 0).
#pragma once

#include <vector>

#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

class Embedding {
 public:
  Embedding() = default;
  Embedding(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params, TensorParallel tp,
            int64_t micro_batch_size);

  void forward(const Tensor& ids, Tensor& hidden);
  // Accumulates the tables' gradients from d_hidden.
  void backward(const Tensor& ids, const Tensor& d_hidden);

  // Indices in the store of the parameters this layer owns (for gradient-ready hooks).
  const std::vector<size_t>& parameter_indices() const { return param_indices_; }

 private:
  ModelConfig config_;
  ModelLayout layout_;
  TensorParallel tp_;
  Tensor word_, word_grad_;
  Tensor position_, position_grad_;
  std::vector<size_t> param_indices_;
};

}  // namespace lattice
