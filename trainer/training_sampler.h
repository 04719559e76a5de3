// TrainingSampler: the short samples `lattice train` logs every training.sample_interval steps,
// drawn from the weights being trained through a forward-only model of their own (one process).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/tokenizer.h"
#include "model/parameter_store.h"
#include "trainer/config.h"
#include "trainer/text_generator.h"

namespace lattice {

class TrainingSampler {
 public:
  static constexpr int64_t kSampleTokens = 32;

  // The tokenizer is the one recorded with the data (else the byte tokenizer); the prompt is
  // training.sample_prompt, or the end-of-document token when it is empty (a new document).
  TrainingSampler(const Config& config, ParameterStore& params);

  // Logs `step {step} | sample: "<prompt + continuation>"` (temperature 1 over the whole
  // vocabulary, seeded by training.seed). Touches nothing of training: not the data, not the
  // training activations, no random state (training has none; the generator seeds its own).
  void log_sample(int64_t step);

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  TextGenerator generator_;
  std::vector<int32_t> prompt_;
  SamplingOptions options_;
};

}  // namespace lattice
