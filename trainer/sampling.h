// Picking the next token from a host vector of logits: greedy (temperature 0), or softmax at a
// temperature over all or the top-k logits, drawn from a seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace lattice {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0 = greedy argmax
  int64_t top_k = 0;         // 0 = the whole vocabulary
  uint64_t seed = 1234;
};

// temperature 0: the index of the largest logit (the lowest on ties). Else the logits are divided
// by the temperature, cut to the top_k largest (ties: lower index first; top_k 1 = greedy) and one
// index is drawn from their softmax with one 53-bit uniform from `rng`, so a seed fixes the draw.
int32_t sample_token(std::span<const float> logits, double temperature, int64_t top_k, std::mt19937_64& rng);

}  // namespace lattice
