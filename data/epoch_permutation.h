// EpochPermutation: a seeded bijection on [0, n) computed per index in O(1) memory, used to shuffle
// the order of samples within an epoch without materializing a permutation array.
#pragma once

#include <cstdint>

namespace lattice {

// A 6-round balanced Feistel network on the smallest even-bit domain [0, 4^h) that holds n,
// with cycle-walking (re-encrypt until the value falls below n; expected < 4 rounds). The round
// function is splitmix64 of (right half XOR a round key); round keys are splitmix64 outputs of
// (seed, epoch, round). Deterministic across platforms and builds; a different (seed, epoch) gives
// an unrelated permutation.
class EpochPermutation {
 public:
  EpochPermutation(int64_t n, uint64_t seed, uint64_t epoch);
  int64_t size() const { return n_; }
  // The element at position i (0 <= i < n).
  int64_t operator()(int64_t i) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t encrypt(uint64_t x) const;

  int64_t n_;
  int half_bits_;
  uint64_t mask_;
  uint64_t keys_[kRounds];
};

uint64_t splitmix64(uint64_t x);

}  // namespace lattice
