// BatchLoader: what the trainer calls each micro-batch — fills preallocated i32 input_ids/targets
// tensors with samples of one split, following the sample contract in data/gpt_dataset.h.
#pragma once

#include <cstdint>
#include <memory>

#include "data/data_config.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "kernels/tensor.h"

namespace lattice {

// Micro-batch m of global batch g (global batch size B, micro-batch size mb) is the global sample
// counters g*B + m*mb ... g*B + m*mb + mb - 1; row r of input_ids is sample tokens [0, S), row r
// of targets tokens [1, S+1). The loader holds no mutable state: micro_batch() is const and
// thread-safe, and the position in the data is just (g, m), so resuming is choosing g. A later
// data-parallel view takes rows of the same global batch through fill_samples().
class BatchLoader {
 public:
  // Opens config.path. vocab_size > 0: every token handed out is checked to be < vocab_size
  // (InputError naming the dataset, otherwise unchecked). Throws InputError for a bad data.path,
  // data.split, or a split with fewer than seq_length + 1 tokens.
  BatchLoader(const DataConfig& config, Split split, int64_t seq_length, int64_t vocab_size = 0);
  // Shares an already opened dataset (e.g. between the train and valid loaders).
  BatchLoader(std::shared_ptr<const IndexedDataset> dataset, const DataConfig& config, Split split,
              int64_t seq_length, int64_t vocab_size = 0);

  // input_ids, targets: CPU i32 tensors of shape [micro_batch_size, seq_length].
  void micro_batch(int64_t global_batch_index, int64_t micro_index, int64_t micro_batch_size,
                   int64_t global_batch_size, Tensor& input_ids, Tensor& targets) const;
  // Rows r = 0..rows-1 of input_ids/targets ([rows, S] CPU i32) get global sample first_sample + r.
  void fill_samples(int64_t first_sample, Tensor& input_ids, Tensor& targets) const;

  Split split() const { return split_; }
  int64_t seq_length() const { return samples_.seq_length(); }
  int64_t num_samples() const { return samples_.num_samples(); }  // per epoch
  int64_t num_tokens() const { return samples_.num_tokens(); }
  DocumentRange documents() const { return samples_.documents(); }
  const GptSamples& samples() const { return samples_; }
  const IndexedDataset& dataset() const { return samples_.dataset(); }
  std::shared_ptr<const IndexedDataset> dataset_ptr() const { return dataset_; }
  // Largest token id in this split (scans all of its tokens; call once at startup if wanted).
  int32_t max_token_id() const;

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  Split split_;
  int64_t vocab_size_;
  GptSamples samples_;
};

// Opens a dataset prefix; throws InputError naming data.path when it is empty.
std::shared_ptr<const IndexedDataset> open_dataset(const DataConfig& config);

}  // namespace lattice
