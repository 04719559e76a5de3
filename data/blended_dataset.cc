// BlendedSamples: Megatron's greedy blending with lazily extended count snapshots.
#include "data/blended_dataset.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

namespace {

// One step of Megatron's build_blending_indices (helpers.cpp) at sample n: the source with the
// largest w_i * max(n, 1) - count_i, ties to the lowest i. This file is compiled with
// -ffp-contract=off (data/BUILD.bazel) so that w_i * x - count_i is rounded twice, as in Megatron's
// helpers (built without -march, so no FMA on x86-64): a fused multiply-subtract breaks exact ties
// (e.g. weights 0.7/0.3) differently.
inline int64_t pick(const std::vector<double>& w, const int64_t* counts, int64_t n) {
  const double x = std::max(static_cast<double>(n), 1.0);
  int64_t best = 0;
  double best_err = w[0] * x - static_cast<double>(counts[0]);
  for (size_t i = 1; i < w.size(); ++i) {
    const double err = w[i] * x - static_cast<double>(counts[i]);
    if (err > best_err) {
      best_err = err;
      best = static_cast<int64_t>(i);
    }
  }
  return best;
}

// numpy.sum of a contiguous float64 array, bit for bit: numpy's pairwise summation (fewer than 8
// values added left to right; up to 128 in 8 interleaved partial sums, combined pairwise, then the
// remainder; more split in halves at a multiple of 8).
double numpy_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = -0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_sum(a, n2) + numpy_sum(a + n2, n - n2);
}

// Megatron's normalize(): w / numpy.sum(w) in float64.
void normalize(std::vector<double>& w) {
  const double total = numpy_sum(w.data(), w.size());
  for (double& x : w) x /= total;
}

}  // namespace

BlendedSamples::BlendedSamples(std::vector<std::shared_ptr<const SampleSource>> sources, std::vector<double> weights)
    : sources_(std::move(sources)), weights_(std::move(weights)) {
  LATTICE_CHECK(!sources_.empty() && sources_.size() == weights_.size(),
                "BlendedSamples needs one weight per source ({} sources, {} weights)", sources_.size(),
                weights_.size());
  for (size_t i = 0; i < sources_.size(); ++i) {
    LATTICE_CHECK(sources_[i] != nullptr, "blend source {} is null", i);
    LATTICE_CHECK(std::isfinite(weights_[i]) && weights_[i] > 0, "blend weight {} must be > 0, got {}", i,
                  weights_[i]);
    LATTICE_CHECK(sources_[i]->seq_length() == sources_[0]->seq_length(), "blend sources differ in seq_length");
  }
  // Megatron normalizes the blend weights twice, bit for bit the same arithmetic here: once in
  // BlendedMegatronDatasetBuilder and again ("redundant normalization") in BlendedDataset.
  normalize(weights_);
  normalize(weights_);
  snapshots_.assign(sources_.size(), 0);  // block 0: all counts 0
}

BlendedSamples::Choice BlendedSamples::choose(int64_t n) const {
  LATTICE_CHECK(n >= 0, "negative sample counter {}", n);
  const size_t ns = sources_.size();
  const int64_t block = n / kBlock;
  std::vector<int64_t> counts(ns);
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t have = static_cast<int64_t>(snapshots_.size() / ns);  // blocks 0..have-1 known
    if (have <= block) {
      snapshots_.reserve((block + 1) * ns);
      std::vector<int64_t> c(snapshots_.end() - ns, snapshots_.end());
      for (int64_t b = have - 1; b < block; ++b) {
        for (int64_t m = b * kBlock; m < (b + 1) * kBlock; ++m) ++c[pick(weights_, c.data(), m)];
        snapshots_.insert(snapshots_.end(), c.begin(), c.end());
      }
    }
    std::copy(snapshots_.begin() + block * ns, snapshots_.begin() + (block + 1) * ns, counts.begin());
  }
  for (int64_t m = block * kBlock; m < n; ++m) ++counts[pick(weights_, counts.data(), m)];
  const int64_t i = pick(weights_, counts.data(), n);
  return Choice{i, counts[i]};
}

void BlendedSamples::read(int64_t n, int32_t* out) const {
  const Choice c = choose(n);
  sources_[c.source]->read(c.sample, out);
}

std::string BlendedSamples::describe(int64_t n) const {
  const Choice c = choose(n);
  return fmt::format("blended sample {} = blend source {}: {}", n, c.source, sources_[c.source]->describe(c.sample));
}

}  // namespace lattice
