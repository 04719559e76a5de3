// data.split document ranges and data.blend interleaving against tests/data/megatron_reference.py,
// an independent Python port of megatron-core's split matrix / normalize /
// build_blending_indices (Python floats: float64, every operation rounded on its own).
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "tests/data/test_util.h"

using namespace lattice;

namespace {

std::string reference_script() { return lattice::testing::repository_file("tests/data/megatron_reference.py"); }

// The reference's stdout for `python3 megatron_reference.py ARGS`.
std::string run_reference(const std::string& args) {
  const std::string cmd = "python3 " + reference_script() + " " + args;
  INFO(cmd);
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[65536];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  REQUIRE(pclose(p) == 0);
  return out;
}

std::string exact(double v) {
  std::ostringstream s;
  s.precision(17);  // round-trips: Python parses the same double
  s << v;
  return s.str();
}

// A source with no data: only BlendedSamples' choice of source is under test.
class NullSource final : public SampleSource {
 public:
  int64_t seq_length() const override { return 1; }
  void read(int64_t, int32_t* out) const override { out[0] = out[1] = 0; }
  std::string describe(int64_t) const override { return "null"; }
};

std::shared_ptr<const BlendedSamples> blend_of(const std::vector<double>& weights) {
  std::vector<std::shared_ptr<const SampleSource>> sources;
  for (size_t i = 0; i < weights.size(); ++i) sources.push_back(std::make_shared<const NullSource>());
  return std::make_shared<const BlendedSamples>(std::move(sources), weights);
}

}  // namespace

TEST_CASE("data.split bounds equal Megatron's split indices (Python reference)") {
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= 400; ++n) sizes.push_back(n);
  for (int64_t n : {997LL, 1000LL, 1001LL, 12345LL, 99999LL, 2147483653LL, 1000000000007LL}) sizes.push_back(n);
  std::string ns;
  for (int64_t n : sizes) ns += " " + std::to_string(n);
  for (const char* split : {"969,30,1", "949,50,1", "1,1,1", "1,1", "98,2", "8,1,1", "0.8,0.1,0.1", "99,1,0",
                            "3,0,7", "1", "0,1,1", "0,1,0", "2,1,1", "1,2,3", "7,7,7", "0.5,0.25,0.25"}) {
    INFO("data.split " << split);
    std::istringstream ref(run_reference(std::string("split ") + split + ns));
    for (int64_t n : sizes) {
      INFO("N = " << n);
      std::array<int64_t, 4> b{};
      REQUIRE(static_cast<bool>(ref >> b[0] >> b[1] >> b[2] >> b[3]));
      const auto r = split_document_ranges(split, n);
      REQUIRE(r[0].begin == b[0]);
      REQUIRE(r[0].end == b[1]);
      REQUIRE(r[1].begin == b[1]);
      REQUIRE(r[1].end == b[2]);
      REQUIRE(r[2].begin == b[2]);
      REQUIRE(r[2].end == b[3]);
    }
  }
}

TEST_CASE("data.blend order equals Megatron's build_blending_indices (Python reference)") {
  std::vector<std::vector<double>> cases = {
      {0.9, 0.1},       // its first picks are derived by hand below
      {0.7, 0.3},       // exact ties (n = 10: 7 - 7 = 3 - 3 = 0) that an FMA breaks the other way
      {0.2, 0.3, 0.5},  //
      {5, 3, 2},        // normalized to 0.5, 0.3, 0.2; ties too
      {969, 30, 1},
      {1, 1, 1},
  };
  // Eight or more weights: numpy.sum's pairwise summation differs from a left-to-right sum.
  std::vector<double> ten, many;
  for (int i = 0; i < 10; ++i) ten.push_back(0.1 * (i + 1) + 1e-3 / (i + 3));
  for (int i = 0; i < 150; ++i) many.push_back(1.0 / (i + 7) + 0.37 * (i % 5));
  cases.push_back(ten);
  cases.push_back(many);
  const int64_t size = 5000;  // several of BlendedSamples' 1024-sample snapshot blocks
  for (const auto& w : cases) {
    std::string arg;
    for (double x : w) arg += (arg.empty() ? "" : ",") + exact(x);
    INFO("weights " << arg);
    std::istringstream ref(run_reference("blend " + arg + " " + std::to_string(size)));
    auto blended = blend_of(w);
    // The normalized weights, bit for bit.
    std::string line;
    REQUIRE(static_cast<bool>(std::getline(ref, line)));
    std::istringstream hex(line);
    for (size_t i = 0; i < w.size(); ++i) {
      std::string h;
      REQUIRE(static_cast<bool>(hex >> h));
      CAPTURE(i, h);
      REQUIRE(blended->weights()[i] == std::strtod(h.c_str(), nullptr));
    }
    std::vector<BlendedSamples::Choice> expected(size);
    for (int64_t n = 0; n < size; ++n) REQUIRE(static_cast<bool>(ref >> expected[n].source >> expected[n].sample));
    for (int64_t n = 0; n < size; ++n) {
      CAPTURE(n);
      const auto c = blended->choose(n);
      REQUIRE(c.source == expected[n].source);
      REQUIRE(c.sample == expected[n].sample);
    }
    // Out of order on a fresh object (the snapshots are built on demand).
    auto fresh = blend_of(w);
    for (int64_t n : {4999, 3, 2048, 1023, 1024, 0, 1, 10, 11}) {
      CAPTURE(n);
      const auto c = fresh->choose(n);
      REQUIRE(c.source == expected[n].source);
      REQUIRE(c.sample == expected[n].sample);
    }
  }
}

TEST_CASE("data.blend first picks, derived by hand from Megatron's rule") {
  // error_i = w_i * max(n, 1) - count_i, largest wins, ties to the lower index.
  // 0.9/0.1: n=0 (x=1): 0.9 vs 0.1 -> 0.  n=1 (x=1, counts 1,0): -0.1 vs 0.1 -> 1.
  //   n=2..9 (counts n-1,1): 0.9n-(n-1) = 1-0.1n vs 0.1n-1: 1-0.1n larger -> 0.
  //   n=10 (counts 9,1): 9-9 = 0 vs 1-1 = 0 (0.9*10 and 0.1*10 round to 9.0 and 1.0): tie -> 0.
  //   n=11 (counts 10,1): 9.9-10 = -0.1 vs 1.1-1 = 0.1 -> 1.
  // (The old rule w_i*(n+1) - count_i gave 0 for n = 0..8 and 1 first at n = 9.)
  {
    auto b = blend_of({0.9, 0.1});
    const std::vector<int64_t> want = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    for (int64_t n = 0; n < 12; ++n) {
      CAPTURE(n);
      REQUIRE(b->choose(n).source == want[n]);
    }
    REQUIRE(b->choose(11).sample == 1);  // dataset 1's second sample
    REQUIRE(b->choose(10).sample == 9);  // dataset 0's tenth
  }
  // 0.7/0.3 (counts before sample n in parentheses): n=0 (0,0): 0.7 vs 0.3 -> 0.  n=1 (1,0): -0.3
  //   vs 0.3 -> 1.  n=2 (1,1): 1.4-1 = 0.4 vs 0.6-1 = -0.4 -> 0.  n=3 (2,1): 2.1-2 = 0.1 vs
  //   0.9-1 = -0.1 -> 0.  n=4 (3,1): 2.8-3 = -0.2 vs 1.2-1 = 0.2 -> 1.  n=5 (3,2): 0.5 vs -0.5 -> 0.
  //   n=6 (4,2): 0.2 vs -0.2 -> 0.  n=7 (5,2): -0.1 vs 0.1 -> 1.  n=8 (5,3): 0.6 vs -0.6 -> 0.
  //   n=9 (6,3): 0.3 vs -0.3 -> 0.  n=10 (7,3): 0.7*10 rounds
  //   to 7.0 and 0.3*10 to 3.0, so 0 vs 0: tie -> 0 (fused, 0.7*10-7 = -4.4e-16 < 0.3*10-3 =
  //   -1.1e-16 would pick 1).  n=11 (8,3): 7.7-8 = -0.3 vs 3.3-3 = 0.3 -> 1.
  {
    auto b = blend_of({0.7, 0.3});
    const std::vector<int64_t> want = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1};
    for (int64_t n = 0; n < 12; ++n) {
      CAPTURE(n);
      REQUIRE(b->choose(n).source == want[n]);
    }
  }
}
