// EpochPermutation: Feistel network with cycle-walking.
#include "data/epoch_permutation.h"

#include "kernels/error.h"

namespace lattice {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

EpochPermutation::EpochPermutation(int64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  LATTICE_CHECK(n > 0, "EpochPermutation needs n > 0, got {}", n);
  int bits = 0;
  while (bits < 63 && (uint64_t{1} << bits) < static_cast<uint64_t>(n)) ++bits;
  half_bits_ = bits <= 2 ? 1 : (bits + 1) / 2;
  mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = splitmix64(seed ^ splitmix64(epoch ^ 0x6c61747469636521ULL));  // "lattice!"
  for (int r = 0; r < kRounds; ++r) {
    k = splitmix64(k + static_cast<uint64_t>(r));
    keys_[r] = k;
  }
}

uint64_t EpochPermutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t next = left ^ (splitmix64(right ^ keys_[r]) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t EpochPermutation::operator()(int64_t i) const {
  LATTICE_CHECK(i >= 0 && i < n_, "permutation index {} outside [0, {})", i, n_);
  uint64_t x = static_cast<uint64_t>(i);
  do {
    x = encrypt(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

}  // namespace lattice
