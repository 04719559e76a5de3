// Autoregressive generation by recomputing the forward over a sliding window.
#include "trainer/text_generator.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "kernels/cpu/embedding.h"
#include "kernels/error.h"
#include "trainer/step_readback.h"

namespace lattice {

TextGenerator::TextGenerator(const ModelConfig& config, ParameterStore& params)
    : ctx_(params.context()),
      model_(config, params, 1),
      host_ids_(Tensor::zeros({1, config.seq_length}, DType::kI32)),
      ids_(ctx_.zeros({1, config.seq_length}, DType::kI32)),
      targets_(ctx_.zeros({1, config.seq_length}, DType::kI32)),
      losses_(ctx_.empty({config.seq_length})) {}

std::vector<int32_t> TextGenerator::generate(std::vector<int32_t> context, const SamplingOptions& options,
                                             int64_t sample_vocab, int32_t stop_id) {
  const int64_t T = model_.config().seq_length;
  LATTICE_CHECK(!context.empty() && sample_vocab >= 1 && sample_vocab <= model_.config().vocab_size,
                "generate: {} context tokens, sample vocabulary {}", context.size(), sample_vocab);
  // Checked here, on the host: the model's ops take ids as checked (ops::Ids), and sampled tokens
  // are below sample_vocab.
  const int64_t bad =
      cpu::first_bad_index(context.data(), static_cast<int64_t>(context.size()), model_.config().vocab_size);
  if (bad >= 0) {
    throw InputError(fmt::format("prompt token {} at position {} is outside [0, {}) (model.vocab_size): the "
                                 "tokenizer does not match the model",
                                 context[bad], bad, model_.config().vocab_size));
  }
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < options.max_new_tokens) {
    // The window sits at positions 0..n-1; causal attention keeps the stale tail after it out of
    // row n-1, whose logits predict the next token. The targets (zeros) only feed the unused loss.
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(context.size()), T);
    std::copy(context.end() - n, context.end(), host_ids_.i32());  // host input, as the data loader fills it
    ctx_.copy_from_host(host_ids_, ids_);
    model_.forward(ids_, targets_, losses_);
    const std::vector<float> row = read_logits_row(model_.logits(), n - 1, sample_vocab);
    const int32_t next = sample_token(row, options.temperature, options.top_k, rng);
    out.push_back(next);
    if (next == stop_id) break;
    context.push_back(next);
  }
  return out;
}

}  // namespace lattice
