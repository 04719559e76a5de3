// Embedding: token (and learned position) embeddings, the first thing the first pipeline stage
// runs. ids i32[B, T] -> hidden [tokens, H] (the residual stream entering layer 0).
// Tensor-parallel: the word table is vocab-parallel — each tp rank looks up the ids in its rows
// (the others contribute 0) and the ranks' lookups are summed: all-reduce, or under sequence
// parallelism a reduce-scatter that leaves each rank its own tokens. Learned positions are then
// added to the local tokens (position = global token index mod T).
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

  // hidden: [local tokens, H].
  void forward(const Tensor& ids, Tensor& hidden);
  // Accumulates the tables' gradients from d_hidden [local tokens, H].
  void backward(const Tensor& ids, const Tensor& d_hidden);

  // Indices in the store of the parameters this layer owns (for gradient-ready hooks).
  const std::vector<size_t>& parameter_indices() const { return param_indices_; }

 private:
  ModelConfig config_;
  ModelLayout layout_;
  TensorParallel tp_;
  int64_t first_row_ = 0;    // vocabulary row of the local table's row 0
  int64_t first_token_ = 0;  // flattened token index of the local tokens' first (SP)
  Tensor word_, word_grad_;
  Tensor position_, position_grad_;
  Tensor full_;  // [B·T, H] SP only: the partial lookups before the reduce-scatter, and in
                 // backward the gathered d_hidden
  std::vector<size_t> param_indices_;
};

}  // namespace lattice
