// GPT samples over an indexed dataset: the train/valid/test document split, the cut of a split's
// token stream into overlapping (S+1)-token samples, epochs and seeded shuffling.
//
// THE CONTRACT (outside tools rely on it):
//   * data.split "a,b,c" (1 to 3 weights, ',' or '/' separated, missing ones 0) gives contiguous
//     document ranges: with N documents and cumulative weights c0=0, c1=a, c2=a+b, c3=a+b+c,
//     bound_i = floor(N * c_i / c3 + 0.5) (bound_3 = N); split i = documents [bound_i, bound_i+1).
//   * A split's token stream is its documents' tokens concatenated in order (EOD tokens included,
//     they are in the data). With S = seq_length, sample s is tokens [s*S, s*S + S + 1) of that
//     stream; samples overlap by one token; num_samples = floor((tokens - 1) / S).
//   * The global sample counter k (k >= 0, unbounded) maps to epoch e = k / num_samples and
//     position p = k % num_samples. With shuffle OFF, k uses sample p: sample k is exactly
//     tokens [k*S, k*S + S + 1) of the training split (for k < num_samples), and global batch g is
//     samples [g*B, (g+1)*B). With shuffle ON, k uses sample EpochPermutation(num_samples,
//     data.seed, e)(p): each epoch is a different seeded permutation of the same samples.
//   * A sample's input is its tokens [0, S), its target tokens [1, S+1).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
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

class GptSamples {
 public:
  // `documents` must lie within the dataset. Throws InputError if the range has fewer than
  // seq_length + 1 tokens, naming `split_label`, the dataset and the sizes.
  GptSamples(std::shared_ptr<const IndexedDataset> dataset, DocumentRange documents, int64_t seq_length,
             bool shuffle, uint64_t seed, std::string split_label);

  const IndexedDataset& dataset() const { return *dataset_; }
  DocumentRange documents() const { return documents_; }
  int64_t seq_length() const { return seq_length_; }
  int64_t num_tokens() const { return cumulative_.back(); }
  int64_t num_samples() const { return num_samples_; }  // per epoch
  bool shuffle() const { return shuffle_; }

  // Which in-epoch sample the global sample counter k uses (see the contract).
  int64_t sample_for(int64_t k) const;
  // Tokens [begin, begin + count) of the split's token stream (binary search over cumulative
  // document offsets, then a copy across document boundaries).
  void read_tokens(int64_t begin, int64_t count, int32_t* out) const;
  // The S+1 tokens of in-epoch sample s.
  void read_sample(int64_t s, int32_t* out) const { read_tokens(s * seq_length_, seq_length_ + 1, out); }

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  DocumentRange documents_;
  int64_t seq_length_;
  bool shuffle_;
  uint64_t seed_;
  std::string label_;
  std::vector<int64_t> cumulative_;  // cumulative_[j] = tokens in documents [begin, begin + j)
  int64_t num_samples_ = 0;
};

}  // namespace lattice
