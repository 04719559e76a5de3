// Counter-based normal init: Philox4x32-10 known answers, moments over 1e6 samples, and layout
// independence (a box at an offset equals the same region of the full-tensor init).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/counter_rng.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  using rng::Philox4x32;
  auto run = [](Philox4x32 c, uint32_t k0, uint32_t k1) { return rng::philox4x32_10(c, k0, k1); };
  Philox4x32 a = run({{0, 0, 0, 0}}, 0, 0);
  CHECK(a.v[0] == 0x6627e8d5u);
  CHECK(a.v[1] == 0xe169c58du);
  CHECK(a.v[2] == 0xbc57ac4cu);
  CHECK(a.v[3] == 0x9b00dbd8u);
  Philox4x32 b = run({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  CHECK(b.v[0] == 0x408f276du);
  CHECK(b.v[3] == 0x6d5451fdu);
  Philox4x32 c = run({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  CHECK(c.v[0] == 0xd16cfe09u);
  CHECK(c.v[1] == 0x94fdccebu);
  CHECK(c.v[2] == 0x5001e420u);
  CHECK(c.v[3] == 0x24126ea1u);
}

TEST_CASE("fill_normal has mean 0 and the requested std over 1e6 samples") {
  const float std = 0.02f;
  Tensor x = Tensor::empty({1000, 1000});
  ops::fill_normal(x, {1000, 1000}, {0, 0}, 1234, 99, std);
  double s = 0, s2 = 0, s4 = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.f32()[i] / std;
    s += v;
    s2 += v * v;
    s4 += v * v * v * v;
  }
  const double n = static_cast<double>(x.numel());
  const double mean = s / n, var = s2 / n - mean * mean;
  // Standard errors over 1e6 samples: mean 1e-3, variance ~1.4e-3; kurtosis of a normal is 3.
  CHECK(std::abs(mean) < 5e-3);
  CHECK(std::abs(std::sqrt(var) - 1.0) < 5e-3);
  CHECK(std::abs(s4 / n - 3.0) < 0.05);
  // Different streams and seeds give different numbers.
  Tensor y = Tensor::empty({1000, 1000});
  ops::fill_normal(y, {1000, 1000}, {0, 0}, 1234, 100, std);
  CHECK(y.f32()[0] != x.f32()[0]);
  CHECK(y.f32()[12345] != x.f32()[12345]);
}

TEST_CASE("fill_normal is layout independent: a box equals the same region of the full tensor") {
  const int64_t rows = 37, cols = 53;
  Tensor full = Tensor::empty({rows, cols});
  ops::fill_normal(full, {rows, cols}, {0, 0}, 7, 42, 1.0f);
  // Column-parallel-like box (odd offsets so Philox blocks of 4 straddle the box edges).
  Tensor box = Tensor::empty({10, 21});
  ops::fill_normal(box, {rows, cols}, {5, 13}, 7, 42, 1.0f);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t c = 0; c < 21; ++c) REQUIRE(box.f32()[r * 21 + c] == full.f32()[(r + 5) * cols + c + 13]);
  // Row range, and the element-wise definition.
  Tensor tail = Tensor::empty({7, cols});
  ops::fill_normal(tail, {rows, cols}, {30, 0}, 7, 42, 1.0f);
  for (int64_t i = 0; i < tail.numel(); ++i) REQUIRE(tail.f32()[i] == full.f32()[30 * cols + i]);
  CHECK(full.f32()[101] == static_cast<float>(rng::normal_from_counter(7, 42, 101)));
  // A 3-D box and a 1-D box of a long flat tensor (chunked in parallel).
  Tensor full3 = Tensor::empty({4, 6, 5});
  ops::fill_normal(full3, {4, 6, 5}, {0, 0, 0}, 3, 5, 0.5f);
  Tensor box3 = Tensor::empty({2, 3, 2});
  ops::fill_normal(box3, {4, 6, 5}, {1, 2, 3}, 3, 5, 0.5f);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        REQUIRE(box3.f32()[(a * 3 + b) * 2 + c] == full3.f32()[((a + 1) * 6 + b + 2) * 5 + c + 3]);
  Tensor flat = Tensor::empty({20000});
  ops::fill_normal(flat, {50001}, {30001}, 3, 5, 1.0f);
  CHECK(flat.f32()[19999] == static_cast<float>(rng::normal_from_counter(3, 5, 50000)));
  CHECK(flat.f32()[4099] == static_cast<float>(rng::normal_from_counter(3, 5, 34100)));
  CHECK_THROWS_AS(ops::fill_normal(box, {rows, cols}, {30, 0}, 7, 42, 1.0f), Error);
}
