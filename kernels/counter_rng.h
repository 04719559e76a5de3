// Counter-based RNG for layout-independent initialization: Philox4x32-10 (Salmon et al., SC'11,
// the Random123 / cuRAND generator) plus Box-Muller. Every value is a pure function of
// (seed, stream, global element index), so any sharding of a tensor draws exactly the numbers a
// single process would. Header-only and branch-free so the CUDA backend can reuse it verbatim.
//
// normal_from_counter(seed, stream, g):
//   block = g / 4, lane = g % 4
//   (r0, r1, r2, r3) = Philox4x32-10(counter = {lo(block), hi(block), lo(stream), hi(stream)},
//                                    key = {lo(seed), hi(seed)})
//   u_i = (r_i + 0.5) / 2^32 in (0, 1)          (never 0, so log is finite)
//   z0, z1 = sqrt(-2 ln u0) * {cos, sin}(2 pi u1); z2, z3 likewise from (u2, u3)   (in double)
//   return z_lane
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LATTICE_HOST_DEVICE __host__ __device__
#else
#define LATTICE_HOST_DEVICE
#endif

namespace lattice::rng {

struct Philox4x32 {
  uint32_t v[4];
};

LATTICE_HOST_DEVICE inline void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds; matches the Random123 known-answer vectors.
LATTICE_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kW0;
      key1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(kM0, ctr.v[0], &hi0, &lo0);
    mulhilo32(kM1, ctr.v[2], &hi1, &lo1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// The four standard normals of Philox block `block` (global indices 4*block .. 4*block+3).
LATTICE_HOST_DEVICE inline void normal4_from_counter(uint64_t seed, uint64_t stream, uint64_t block, double z[4]) {
  const Philox4x32 r = philox4x32_10(
      Philox4x32{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(stream),
                  static_cast<uint32_t>(stream >> 32)}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  constexpr double kInv2Pow32 = 1.0 / 4294967296.0;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int pair = 0; pair < 2; ++pair) {
    const double u0 = (static_cast<double>(r.v[2 * pair]) + 0.5) * kInv2Pow32;
    const double u1 = (static_cast<double>(r.v[2 * pair + 1]) + 0.5) * kInv2Pow32;
    const double radius = std::sqrt(-2.0 * std::log(u0));
    z[2 * pair] = radius * std::cos(kTwoPi * u1);
    z[2 * pair + 1] = radius * std::sin(kTwoPi * u1);
  }
}

// Standard normal for global element index g.
LATTICE_HOST_DEVICE inline double normal_from_counter(uint64_t seed, uint64_t stream, uint64_t g) {
  double z[4];
  normal4_from_counter(seed, stream, g / 4, z);
  return z[g % 4];
}

}  // namespace lattice::rng
