// ModelLayout: which piece of the model this rank holds — its tensor-parallel shard (tp rank of
// tp size, sequence parallelism) and its pipeline chunks (virtual stages c·p + pp rank, each a
// contiguous range of decoder layers; the embedding on virtual stage 0, the head on the last).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace lattice {

struct LayerRange {
  int64_t first = 0;
  int64_t count = 0;
};

struct ModelLayout {
  int tp_rank = 0;
  int tp_size = 1;
  bool sequence_parallel = false;
  int pp_rank = 0;
  int pp_size = 1;
  int virtual_stages = 1;
  // pp_size × virtual_stages layer counts indexed by virtual stage; empty = an even split.
  std::vector<int64_t> layers_per_stage;

  int num_chunks() const { return virtual_stages; }
  int num_virtual_stages() const { return pp_size * virtual_stages; }
  // Chunk c of this rank is virtual stage c·p + pp rank (Megatron's interleaving).
  int virtual_stage(int chunk) const { return chunk * pp_size + pp_rank; }
  bool has_embedding(int chunk) const { return virtual_stage(chunk) == 0; }
  bool has_head(int chunk) const { return virtual_stage(chunk) == num_virtual_stages() - 1; }
  LayerRange chunk_layers(const ModelConfig& config, int chunk) const;

  // The vocabulary rows of the embedding/head: vocab_size rounded up to a multiple of 128 × tp
  // when tp > 1 (so every tp rank holds the same number of rows), else vocab_size.
  int64_t padded_vocab_size(const ModelConfig& config) const;
  int64_t vocab_rows_per_rank(const ModelConfig& config) const { return padded_vocab_size(config) / tp_size; }
  // Tokens of a micro-batch this rank holds outside the tensor-parallel regions (the residual
  // stream): all B·T, or B·T / tp with sequence parallelism.
  int64_t local_tokens(const ModelConfig& config, int64_t micro_batch_size) const;
};

}  // namespace lattice
