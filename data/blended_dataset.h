// BlendedSamples: mixes several sample sources by weight with Megatron's BlendedDataset rule —
// each next sample comes from the source whose realized share lags its weight most.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/gpt_dataset.h"

namespace lattice {

// Megatron's build_blending_indices, bit for bit: global sample n goes to source
// i = argmax_i (w_i * max(n, 1) - count_i(n)) (ties: lowest i; the product and the difference are
// float64, each rounded, no FMA), where w are the weights normalized as Megatron does (w / numpy.sum(w),
// applied twice) and count_i(n) is how many of samples 0..n-1 went to i; it is that source's sample
// count_i(n) (its own global counter, so each source wraps its epochs by itself). The counts are
// snapshotted every kBlock samples (extended lazily, O(n / kBlock) memory), so any sample is
// O(kBlock) work once the snapshots reach it; reaching sample n the first time is O(n * sources) —
// Megatron builds the same arrays, materialized, at startup.
class BlendedSamples final : public SampleSource {
 public:
  static constexpr int64_t kBlock = 1024;

  // weights > 0, one per source, all sources the same seq_length.
  BlendedSamples(std::vector<std::shared_ptr<const SampleSource>> sources, std::vector<double> weights);

  struct Choice {
    int64_t source = 0;
    int64_t sample = 0;  // that source's global sample counter
  };
  Choice choose(int64_t n) const;

  int64_t seq_length() const override { return sources_[0]->seq_length(); }
  void read(int64_t n, int32_t* out) const override;
  std::string describe(int64_t n) const override;

  int64_t num_sources() const { return static_cast<int64_t>(sources_.size()); }
  const SampleSource& source(int64_t i) const { return *sources_[i]; }
  const std::vector<double>& weights() const { return weights_; }  // normalized

 private:
  std::vector<std::shared_ptr<const SampleSource>> sources_;
  std::vector<double> weights_;
  mutable std::mutex mu_;
  // snapshots_[b * sources + i] = count_i(b * kBlock).
  mutable std::vector<int64_t> snapshots_;
};

}  // namespace lattice
