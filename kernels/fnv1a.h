// FNV-1a 64: a small, stable hash of bytes (the same value on every machine and build), for the
// RNG stream of a parameter's init and the config hash in the metrics file. Header-only.
#pragma once

#include <cstdint>
#include <string_view>

namespace lattice {

inline uint64_t fnv1a_64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace lattice
