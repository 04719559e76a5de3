// TextGenerator: samples continuations from a whole model in one process, for `lattice generate`
// and the samples logged during training. No KV cache: each new token recomputes the forward over
// the last min(length, model.seq_length) tokens (a smoke tool, not a server).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/parameter_store.h"
#include "model/transformer.h"
#include "trainer/sampling.h"

namespace lattice {

class TextGenerator {
 public:
  // `params`: the whole model (read only). Activations for one sequence are allocated here.
  TextGenerator(const ModelConfig& config, ParameterStore& params);

  // Samples up to options.max_new_tokens ids after `context` (non-empty) and returns them; stops
  // early after `stop_id` (included; -1 = never). Only ids below `sample_vocab` are drawn (the
  // tokenizer's vocabulary when the model's is larger). A seed gives the same ids every time.
  std::vector<int32_t> generate(std::vector<int32_t> context, const SamplingOptions& options, int64_t sample_vocab,
                                int32_t stop_id);

 private:
  const DeviceContext& ctx_;  // the parameters' device
  Transformer model_;
  Tensor host_ids_;                // [1, T] the window, filled on the host
  Tensor ids_, targets_, losses_;  // [1, T], [1, T], [T] on the device
};

}  // namespace lattice
