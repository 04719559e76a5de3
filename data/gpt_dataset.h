// GPT samples over an indexed dataset: the train/valid/test document split, per-epoch document
// shuffling, the cut of an epoch's token stream into overlapping (S+1)-token samples, and the
// seeded sample order (Megatron's GPTDataset semantics, with its index arrays computed on demand).
//
// THE CONTRACT (outside tools rely on it):
//   * data.split "a,b,c" (1 to 3 weights, ',' or '/' separated, missing ones 0) gives contiguous
//     document ranges exactly as megatron-core's split matrix does (float64 throughout): with N
//     documents, w = (a, b, c) / ((a + b) + c), bookends c_0 = 0, c_i+1 = c_i + w_i, bound_i =
//     round(c_i * N) with halves to even (bound_3 = N); split i = documents [bound_i, bound_i+1).
//     (E.g. "1,1,1" over 10 documents: bounds 0,3,7,10.)
//   * Epoch e's token stream is the split's documents concatenated (EOD tokens included, they are
//     in the data) in epoch e's document order: with shuffle OFF the file order, with shuffle ON
//     the seeded permutation EpochPermutation(num_documents, document key, e) of the split's
//     documents. With S = seq_length, in-epoch sample s is tokens [s*S, s*S + S + 1) of that
//     stream; samples overlap by one token; num_samples = floor((tokens - 1) / S), the same every
//     epoch (the last < S tokens of an epoch's stream are not used that epoch).
//   * The global sample counter k (k >= 0, unbounded, 64-bit) maps to epoch e = k / num_samples
//     and position p = k % num_samples. With shuffle OFF, k uses sample p: sample k is exactly
//     tokens [k*S, k*S + S + 1) of the training split (for k < num_samples), and global batch g is
//     samples [g*B, (g+1)*B). With shuffle ON, k uses in-epoch sample
//     EpochPermutation(num_samples, seed, e)(p) of epoch e's (document-shuffled) stream.
//   * A sample's input is its tokens [0, S), its target tokens [1, S+1).
// Nothing O(samples) is materialized: the "sample index" entry (epoch, document, offset) of a
// sample is found by binary search over the epoch's cumulative document lengths (O(documents),
// cached for the two most recent epochs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace lattice {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
const char* split_name(Split split);  // "train", "valid", "test"

struct DocumentRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Parses a data.split string into three normalized-later weights. Throws InputError naming
// `field` ("data.split") and the expected form.
std::array<double, 3> parse_split_weights(const std::string& split, const std::string& field = "data.split");
// The three contiguous, disjoint, covering document ranges of the contract above.
std::array<DocumentRange, 3> split_document_ranges(const std::string& split, int64_t num_documents,
                                                   const std::string& field = "data.split");

// Anything that hands out (S+1)-token samples by a global, unbounded, 64-bit sample counter.
// read() is const and thread-safe.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t seq_length() const = 0;
  // The S+1 tokens of global sample k into out[0..S].
  virtual void read(int64_t k, int32_t* out) const = 0;
  // Where global sample k comes from, for error messages ("dataset P, train split, sample 12").
  virtual std::string describe(int64_t k) const = 0;
};

// Where a sample starts: Megatron's sample-index entry.
struct SampleLocation {
  int64_t epoch = 0;
  int64_t sample = 0;    // in-epoch sample (after the sample shuffle)
  int64_t doc_pos = 0;   // position in the epoch's document order (0 = its first document)
  int64_t document = 0;  // the dataset's document number at that position
  int64_t offset = 0;    // token offset inside that document
};

class GptSamples final : public SampleSource {
 public:
  // `documents` must lie within the dataset. Throws InputError if the range has fewer than
  // seq_length + 1 tokens, naming `split_label`, the dataset and the sizes. The sample order uses
  // `seed`, the document order a key derived from it.
  GptSamples(std::shared_ptr<const IndexedDataset> dataset, DocumentRange documents, int64_t seq_length,
             bool shuffle, uint64_t seed, std::string split_label);

  const IndexedDataset& dataset() const { return *dataset_; }
  std::shared_ptr<const IndexedDataset> dataset_ptr() const { return dataset_; }
  DocumentRange documents() const { return documents_; }
  int64_t seq_length() const override { return seq_length_; }
  int64_t num_tokens() const { return cumulative_->back(); }  // per epoch
  int64_t num_samples() const { return num_samples_; }       // per epoch
  bool shuffle() const { return shuffle_; }
  const std::string& label() const { return label_; }

  // Which in-epoch sample the global sample counter k uses (see the contract).
  int64_t sample_for(int64_t k) const;
  // The dataset document at position j of epoch e's document order.
  int64_t document_at(int64_t epoch, int64_t j) const;
  // The sample-index entry of global sample k.
  SampleLocation locate(int64_t k) const;
  void read(int64_t k, int32_t* out) const override;
  std::string describe(int64_t k) const override;

  // Tokens [begin, begin + count) of the split's UNSHUFFLED token stream (file order).
  void read_tokens(int64_t begin, int64_t count, int32_t* out) const;
  // The S+1 tokens of in-epoch sample s of the unshuffled stream.
  void read_sample(int64_t s, int32_t* out) const { read_tokens(s * seq_length_, seq_length_ + 1, out); }

 private:
  // cumulative[j] = tokens in the first j documents of epoch e's order.
  std::shared_ptr<const std::vector<int64_t>> epoch_cumulative(int64_t epoch) const;

  std::shared_ptr<const IndexedDataset> dataset_;
  DocumentRange documents_;
  int64_t seq_length_;
  bool shuffle_;
  uint64_t seed_;
  uint64_t doc_seed_;
  std::string label_;
  // File order: (*cumulative_)[j] = tokens in documents [begin, begin + j).
  std::shared_ptr<const std::vector<int64_t>> cumulative_;
  int64_t num_samples_ = 0;
  mutable std::mutex cache_mu_;
  mutable std::array<std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>>, 2> cache_{};
  mutable int cache_next_ = 0;
};

}  // namespace lattice
