// Samples logged during training.
#include "trainer/training_sampler.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "trainer/data_tokenizer.h"

namespace lattice {

TrainingSampler::TrainingSampler(const Config& config, ParameterStore& params)
    : tokenizer_(resolve_tokenizer(TokenizerOptions{.type = ""}, config)), generator_(config.model, params) {
  prompt_ = tokenizer_->encode(config.training.sample_prompt);
  if (prompt_.empty()) prompt_.push_back(tokenizer_->eod_id());
  options_.max_new_tokens = kSampleTokens;
  options_.temperature = 1.0;
  options_.seed = config.training.seed;
}

void TrainingSampler::log_sample(int64_t step) {
  std::vector<int32_t> ids = prompt_;
  const std::vector<int32_t> added = generator_.generate(prompt_, options_, tokenizer_->vocab_size(), -1);
  ids.insert(ids.end(), added.begin(), added.end());
  // Quoted with JSON escapes: one log line even for newlines, control bytes or a cut UTF-8 sequence.
  const std::string text = nlohmann::json(tokenizer_->decode(ids)).dump(-1, ' ', false,
                                                                         nlohmann::json::error_handler_t::replace);
  spdlog::info("step {:>6} | sample: {}", step, text);
}

}  // namespace lattice
