// BatchLoader: what the trainer calls each micro-batch — fills preallocated i32 input_ids/targets
// tensors with this data-parallel rank's samples of one split, in order, prefetched by a
// background thread; its resumable state is the number of consumed samples.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/data_config.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/prefetcher.h"
#include "kernels/tensor.h"

namespace lattice {

// The datasets a DataConfig names: {data.path} or the data.blend prefixes, in order. Throws
// InputError naming data.path / data.blend[i][1] when missing or when neither or both are set.
std::vector<std::shared_ptr<const IndexedDataset>> open_datasets(const DataConfig& config);
// Opens data.path alone (throws InputError naming data.path when it is empty).
std::shared_ptr<const IndexedDataset> open_dataset(const DataConfig& config);

// The samples of one split: a GptSamples for data.path (the sample contract of gpt_dataset.h holds
// exactly), a BlendedSamples of every dataset's split for data.blend (each dataset is split by
// data.split on its own). `datasets` as open_datasets returns them. Each (split, dataset) gets its
// own seed derived from data.seed. Throws InputError for a bad data.split or a split with fewer
// than seq_length + 1 tokens (naming the dataset).
std::shared_ptr<const SampleSource> make_split_samples(const DataConfig& config,
                                                       const std::vector<std::shared_ptr<const IndexedDataset>>& datasets,
                                                       Split split, int64_t seq_length);
// The seed the samples of (split, dataset i) use.
uint64_t split_seed(uint64_t data_seed, Split split, int64_t dataset);

struct LoaderOptions {
  int64_t micro_batch_size = 1;   // mb
  int64_t global_batch_size = 1;  // B, a multiple of mb * dp_size
  int64_t dp_rank = 0;            // r in [0, D)
  int64_t dp_size = 1;            // D
  int64_t vocab_size = 0;         // > 0: every token handed out is checked to be < vocab_size
  int64_t prefetch = 4;           // micro-batches read ahead by a background thread; 0 = none
};

// Global batch g is global samples [g*B, (g+1)*B). DP rank r reads the contiguous slice
// [g*B + r*B/D, g*B + (r+1)*B/D) of it as M = B/(D*mb) micro-batches of mb consecutive samples.
// Row i of input_ids is the sample's tokens [0, S), row i of targets tokens [1, S+1).
// The state is consumed_samples: the global samples consumed by all ranks together, counting
// micro-steps in lock-step (after this rank's micro-batch m of global batch g it is
// g*B + (m+1)*mb*D, so after a whole step it is (g+1)*B, Megatron's consumed_samples). A loader
// constructed (or seek()ed) at consumed_samples c hands out exactly what an uninterrupted loader
// hands out after c.
class BatchLoader {
 public:
  BatchLoader(std::shared_ptr<const SampleSource> samples, LoaderOptions options, int64_t consumed_samples = 0);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // This rank's next micro-batch (input_ids, targets: CPU i32 [mb, S]). Rethrows a reader error.
  void next(Tensor& input_ids, Tensor& targets);
  int64_t consumed_samples() const { return step_ * options_.micro_batch_size * options_.dp_size; }
  // Continues from `consumed_samples` (a multiple of mb * D). Restarts the prefetcher.
  void seek(int64_t consumed_samples);

  // Random access (const, thread-safe, no prefetch): this rank's micro-batch m of global batch g.
  void micro_batch(int64_t g, int64_t m, Tensor& input_ids, Tensor& targets) const;
  // Rows i = 0..rows-1 of input_ids/targets ([rows, S] CPU i32) get global sample first_sample + i.
  void fill_samples(int64_t first_sample, Tensor& input_ids, Tensor& targets) const;

  int64_t micro_batches_per_step() const;  // M, per rank
  int64_t seq_length() const { return samples_->seq_length(); }
  const LoaderOptions& options() const { return options_; }
  const SampleSource& samples() const { return *samples_; }

 private:
  struct Rows {
    std::vector<int32_t> ids, targets;
  };
  // The first global sample of this rank's micro step t.
  int64_t first_sample_of_step(int64_t t) const;
  void fill_rows(int64_t first_sample, int64_t rows, int32_t* ids, int32_t* targets) const;
  void start_prefetch();

  std::shared_ptr<const SampleSource> samples_;
  LoaderOptions options_;
  int64_t step_ = 0;  // this rank's micro steps consumed
  std::unique_ptr<Prefetcher<Rows>> prefetcher_;
};

}  // namespace lattice
