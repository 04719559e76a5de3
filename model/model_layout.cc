// Layer ranges of pipeline chunks, vocabulary padding, local token counts.
#include "model/model_layout.h"

#include "kernels/error.h"

namespace lattice {

LayerRange ModelLayout::chunk_layers(const ModelConfig& config, int chunk) const {
  const int stages = num_virtual_stages();
  const int s = virtual_stage(chunk);
  LATTICE_CHECK(chunk >= 0 && chunk < virtual_stages, "chunk {} out of range [0, {})", chunk, virtual_stages);
  if (layers_per_stage.empty()) {
    LATTICE_CHECK(config.num_layers % stages == 0, "{} layers do not split evenly over {} virtual stages",
                  config.num_layers, stages);
    const int64_t n = config.num_layers / stages;
    return {s * n, n};
  }
  LATTICE_CHECK(static_cast<int>(layers_per_stage.size()) == stages, "{} layer counts for {} virtual stages",
                layers_per_stage.size(), stages);
  LayerRange r;
  for (int i = 0; i < s; ++i) r.first += layers_per_stage[i];
  r.count = layers_per_stage[s];
  return r;
}

int64_t ModelLayout::padded_vocab_size(const ModelConfig& config) const {
  if (tp_size == 1) return config.vocab_size;
  const int64_t multiple = 128 * static_cast<int64_t>(tp_size);
  return (config.vocab_size + multiple - 1) / multiple * multiple;
}

int64_t ModelLayout::local_tokens(const ModelConfig& config, int64_t micro_batch_size) const {
  const int64_t tokens = micro_batch_size * config.seq_length;
  if (!sequence_parallel) return tokens;
  LATTICE_CHECK(tokens % tp_size == 0, "sequence parallelism: {} tokens per micro-batch do not split over tp {}",
                tokens, tp_size);
  return tokens / tp_size;
}

}  // namespace lattice
