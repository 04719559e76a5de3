// ops::cast between f32 and bf16 against a reference computed independently in this file: the two
// bf16 neighbours of a value and its exact distance to each (in double), rather than the kernel's
// carry trick; plus hand-picked NaN, Inf, subnormal, tie and overflow cases.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/bf16.h"
#include "kernels/ops.h"

using namespace lattice;

namespace {

bool is_nan32(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }
bool is_nan16(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

// Round to nearest, ties to even, by comparing distances; non-NaN inputs only.
uint16_t reference_bf16(uint32_t bits) {
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag == 0x7f800000u) return sign | 0x7f80u;
  const uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;
  const double x = std::bit_cast<float>(mag);
  const double lo_value = std::bit_cast<float>(lo);
  // Above the largest finite bf16 the upper neighbour is Inf, reached at 2^128 (IEEE overflow).
  const double hi_value = hi == 0x7f800000u ? std::ldexp(1.0, 128) : std::bit_cast<float>(hi);
  const double below = x - lo_value, above = hi_value - x;  // exact: 24-bit values in a 53-bit mantissa
  const bool up = above < below || (above == below && ((lo >> 16) & 1u) == 1u);
  return sign | static_cast<uint16_t>((up ? hi : lo) >> 16);
}

std::vector<uint16_t> cast_to_bf16(const std::vector<uint32_t>& bits) {
  Tensor src = Tensor::empty({static_cast<int64_t>(bits.size())});
  for (size_t i = 0; i < bits.size(); ++i) src.f32()[i] = std::bit_cast<float>(bits[i]);
  Tensor dst = Tensor::empty(src.shape(), DType::kBF16);
  ops::cast(src, dst);
  return std::vector<uint16_t>(dst.bf16(), dst.bf16() + dst.numel());
}

void check_against_reference(const std::vector<uint32_t>& bits) {
  const std::vector<uint16_t> got = cast_to_bf16(bits);
  for (size_t i = 0; i < bits.size(); ++i) {
    INFO(std::hex << "f32 0x" << bits[i] << " -> bf16 0x" << got[i]);
    if (is_nan32(bits[i])) {
      REQUIRE(is_nan16(got[i]));
      REQUIRE((got[i] & 0x0040u) != 0);                // quiet
      REQUIRE((got[i] & 0x8000u) == (bits[i] >> 16 & 0x8000u));  // sign kept
    } else {
      REQUIRE(got[i] == reference_bf16(bits[i]));
    }
  }
}

}  // namespace

TEST_CASE("f32 -> bf16: hand-picked cases") {
  struct Case {
    uint32_t f32;
    uint16_t bf16;
  };
  const std::vector<Case> cases = {
      {0x3f800000, 0x3f80},  // 1.0
      {0xbf800000, 0xbf80},  // -1.0
      {0x00000000, 0x0000},  {0x80000000, 0x8000},  // ±0
      {0x7f800000, 0x7f80},  {0xff800000, 0xff80},  // ±Inf
      {0x3f808000, 0x3f80},  // tie, kept lsb even: stays
      {0x3f818000, 0x3f82},  // tie, kept lsb odd: rounds up to even
      {0x3f808001, 0x3f81},  // just above the tie: up
      {0x3f807fff, 0x3f80},  // just below the tie: down
      {0xbf818000, 0xbf82},  // negative tie, odd: away from zero to even
      {0x7f7fffff, 0x7f80},  // max finite f32 overflows to Inf
      {0x7f7f7fff, 0x7f7f},  // below half an ulp over max finite bf16: stays finite
      {0x7f7f8000, 0x7f80},  // exactly half an ulp over max bf16 (odd lsb): Inf
      {0xff7fffff, 0xff80},  // -Inf
      {0x00000001, 0x0000},  // smallest subnormal rounds to 0
      {0x00008000, 0x0000},  // subnormal tie, even: down
      {0x00018000, 0x0002},  // subnormal tie, odd: up
      {0x00008001, 0x0001},  // above the tie: smallest bf16 subnormal
      {0x007fffff, 0x0080},  // largest subnormal rounds up to the smallest normal
      {0x807fffff, 0x8080},
  };
  std::vector<uint32_t> bits;
  for (const Case& c : cases) bits.push_back(c.f32);
  const std::vector<uint16_t> got = cast_to_bf16(bits);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(std::hex << "f32 0x" << cases[i].f32);
    REQUIRE(got[i] == cases[i].bf16);
    REQUIRE(reference_bf16(cases[i].f32) == cases[i].bf16);  // the reference agrees with the table
  }
}

TEST_CASE("f32 -> bf16: NaNs stay quiet NaNs, signalling ones included") {
  const std::vector<uint32_t> nans = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7f80ffff,
                                      0x7fffffff, 0x7fa00000, 0xff812345};
  check_against_reference(nans);
  REQUIRE(cast_to_bf16({0x7f800001})[0] == 0x7fc0);  // would be Inf if only truncated
}

TEST_CASE("f32 -> bf16: every exponent and sign near each rounding boundary, and random bits") {
  std::vector<uint32_t> bits;
  std::mt19937 gen(42);
  for (uint32_t top = 0; top < 512; ++top) {  // sign and exponent
    for (uint32_t mant7 : {0u, 1u, 0x3fu, 0x40u, 0x7eu, 0x7fu}) {
      for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, static_cast<uint32_t>(gen() & 0xffffu)}) {
        bits.push_back(top << 23 | mant7 << 16 | low);
      }
    }
  }
  for (int i = 0; i < 1'000'000; ++i) bits.push_back(gen());
  check_against_reference(bits);  // 1M+ elements: the parallel path too
}

TEST_CASE("bf16 -> f32 is exact for every bf16 value, and round trips") {
  Tensor src = Tensor::empty({65536}, DType::kBF16);
  for (uint32_t b = 0; b < 65536; ++b) src.bf16()[b] = static_cast<uint16_t>(b);
  Tensor wide = Tensor::empty({65536});
  ops::cast(src, wide);
  Tensor back = Tensor::empty({65536}, DType::kBF16);
  ops::cast(wide, back);
  for (uint32_t b = 0; b < 65536; ++b) {
    INFO(std::hex << "bf16 0x" << b);
    const float f = wide.f32()[b];
    const uint32_t exp = (b >> 7) & 0xff, mant = b & 0x7f;
    const double sign = (b & 0x8000) ? -1.0 : 1.0;
    if (exp == 0xff) {
      REQUIRE((mant == 0 ? std::isinf(f) : std::isnan(f)));
    } else {  // value from the fields: subnormals have no implicit 1
      const double v = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, static_cast<int>(exp) - 134);
      REQUIRE(static_cast<double>(f) == sign * v);
      REQUIRE(std::signbit(f) == ((b & 0x8000) != 0));
    }
    if (!(exp == 0xff && mant != 0)) REQUIRE(back.bf16()[b] == b);
  }
}

TEST_CASE("cast checks its tensors") {
  Tensor f = Tensor::zeros({4});
  Tensor h = Tensor::zeros({4}, DType::kBF16);
  Tensor i = Tensor::zeros({4}, DType::kI32);
  Tensor f5 = Tensor::zeros({5});
  Tensor same = Tensor::empty({2, 2});
  f.f32()[1] = 3.0f;
  ops::cast(f, same);  // equal dtypes copy
  REQUIRE(same.f32()[1] == 3.0f);
  REQUIRE_THROWS_WITH(ops::cast(f, i), Catch::Contains("cast: no conversion from f32[4] cpu to i32[4] cpu"));
  REQUIRE_THROWS_WITH(ops::cast(h, f5), Catch::Contains("differ in element count"));
}
