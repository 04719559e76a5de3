// Synthetic micro-batches for trainer tests that train a tiny model on no dataset: uniform random
// token ids and targets in [0, vocab), seeded by the micro-batch's (global batch, index).
#pragma once

#include <cstdint>
#include <random>

#include "kernels/tensor.h"
#include "trainer/step_batches.h"  // MicroBatchSource

namespace lattice::test {

inline MicroBatchSource random_tokens(int32_t vocab) {
  return [vocab](int64_t g, int64_t m, Tensor& ids, Tensor& targets) {
    std::mt19937 rng(static_cast<uint32_t>(g * 31 + m));
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      ids.i32()[i] = token(rng);
      targets.i32()[i] = token(rng);
    }
  };
}

}  // namespace lattice::test
