// GptSamples and the data.split parsing.
#include "data/gpt_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "data/epoch_permutation.h"
#include "kernels/error.h"

namespace lattice {

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "?";
}

std::array<double, 3> parse_split_weights(const std::string& split, const std::string& field) {
  const std::string expect =
      "expected 1 to 3 non-negative weights for train,valid,test separated by ',' such as \"949,50,1\"";
  std::vector<std::string> parts(1);
  for (char ch : split) {
    if (ch == ',' || ch == '/') {
      parts.emplace_back();
    } else {
      parts.back() += ch;
    }
  }
  if (parts.size() > 3) throw InputError(fmt::format("{} \"{}\": {} parts; {}", field, split, parts.size(), expect));
  std::array<double, 3> w = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string p = parts[i];
    p.erase(0, p.find_first_not_of(" \t"));
    p.erase(p.find_last_not_of(" \t") + 1);
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (p.empty() || used != p.size() || !std::isfinite(v) || v < 0) {
      throw InputError(fmt::format("{} \"{}\": weight {} (\"{}\") is not a non-negative number; {}", field, split,
                                   i + 1, p, expect));
    }
    w[i] = v;
  }
  if (!(w[0] + w[1] + w[2] > 0)) {
    throw InputError(fmt::format("{} \"{}\": the weights sum to 0; {}", field, split, expect));
  }
  return w;
}

namespace {

// Python's round() of a finite double >= 0: to the nearest integer, halves to the even one. Exact:
// x - floor(x) is representable, and doubles >= 2^52 are integers already.
double round_half_even(double x) {
  const double f = std::floor(x);
  const double d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

}  // namespace

std::array<DocumentRange, 3> split_document_ranges(const std::string& split, int64_t num_documents,
                                                   const std::string& field) {
  // Megatron-LM's split (megatron-core: the split matrix of convert_split_vector_to_split_matrix,
  // cut by BlendedMegatronDatasetBuilder), with the same float64 arithmetic: the weights normalized
  // by their sum (numpy.sum of 3 values adds left to right), the bookends their running sums
  // c_0 = 0, c_i+1 = c_i + w_i, and bound_i = int(round(c_i * float(N))) with round half to even.
  // (Megatron-LM before megatron-core rounded each split's size and shifted the bounds; "1,1,1" over
  // 10 documents gave 0,4,7,10 there, 0,3,7,10 here.)
  const std::array<double, 3> w = parse_split_weights(split, field);
  const double total = (w[0] + w[1]) + w[2];
  const double n = static_cast<double>(num_documents);
  int64_t bounds[4] = {0, 0, 0, num_documents};
  double bookend = 0;
  for (int i = 1; i < 4; ++i) {
    bookend += w[i - 1] / total;
    // c_3 is 1 up to rounding; the clamp keeps the ranges covering [0, N) whatever it rounds to.
    bounds[i] = std::clamp<int64_t>(static_cast<int64_t>(round_half_even(bookend * n)), bounds[i - 1], num_documents);
  }
  bounds[3] = num_documents;
  return {DocumentRange{bounds[0], bounds[1]}, DocumentRange{bounds[1], bounds[2]},
          DocumentRange{bounds[2], bounds[3]}};
}

GptSamples::GptSamples(std::shared_ptr<const IndexedDataset> dataset, DocumentRange documents, int64_t seq_length,
                       bool shuffle, uint64_t seed, std::string split_label)
    : dataset_(std::move(dataset)),
      documents_(documents),
      seq_length_(seq_length),
      shuffle_(shuffle),
      seed_(seed),
      doc_seed_(splitmix64(seed ^ 0x646f63756d656e74ULL)),  // "document"
      label_(std::move(split_label)) {
  LATTICE_CHECK(dataset_ != nullptr, "GptSamples needs a dataset");
  LATTICE_CHECK(seq_length_ > 0, "seq_length must be positive, got {}", seq_length_);
  LATTICE_CHECK(documents_.begin >= 0 && documents_.begin <= documents_.end &&
                    documents_.end <= dataset_->num_documents(),
                "document range [{}, {}) outside the {} documents of {}", documents_.begin, documents_.end,
                dataset_->num_documents(), dataset_->prefix());
  auto cumulative = std::make_shared<std::vector<int64_t>>(documents_.size() + 1);
  (*cumulative)[0] = 0;
  for (int64_t j = 0; j < documents_.size(); ++j) {
    (*cumulative)[j + 1] = (*cumulative)[j] + dataset_->sequence_length(documents_.begin + j);
  }
  cumulative_ = std::move(cumulative);
  const int64_t tokens = cumulative_->back();
  if (tokens < seq_length_ + 1) {
    throw InputError(fmt::format(
        "the {} split of dataset {} (documents [{}, {}) of {}, data.split) has {} tokens, fewer than "
        "seq_length + 1 = {} needed for one sample; use more data, a smaller model.seq_length, or a "
        "data.split that gives this split more documents",
        label_, dataset_->prefix(), documents_.begin, documents_.end, dataset_->num_documents(), tokens,
        seq_length_ + 1));
  }
  num_samples_ = (tokens - 1) / seq_length_;
}

int64_t GptSamples::sample_for(int64_t k) const {
  LATTICE_CHECK(k >= 0, "negative sample counter {}", k);
  const int64_t epoch = k / num_samples_, pos = k % num_samples_;
  if (!shuffle_) return pos;
  // The permutation object is a few words: building it per call is cheaper than caching it.
  return EpochPermutation(num_samples_, seed_, static_cast<uint64_t>(epoch))(pos);
}

int64_t GptSamples::document_at(int64_t epoch, int64_t j) const {
  LATTICE_CHECK(j >= 0 && j < documents_.size(), "document position {} outside [0, {})", j, documents_.size());
  if (!shuffle_) return documents_.begin + j;
  return documents_.begin + EpochPermutation(documents_.size(), doc_seed_, static_cast<uint64_t>(epoch))(j);
}

std::shared_ptr<const std::vector<int64_t>> GptSamples::epoch_cumulative(int64_t epoch) const {
  if (!shuffle_) return cumulative_;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (auto& [e, v] : cache_)
      if (v && e == epoch) return v;
  }
  // Built outside the lock: O(documents); two threads may build the same epoch, harmlessly.
  const int64_t n = documents_.size();
  auto cum = std::make_shared<std::vector<int64_t>>(n + 1);
  const EpochPermutation perm(n, doc_seed_, static_cast<uint64_t>(epoch));
  (*cum)[0] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t d = perm(j);
    (*cum)[j + 1] = (*cum)[j] + ((*cumulative_)[d + 1] - (*cumulative_)[d]);
  }
  std::lock_guard<std::mutex> lock(cache_mu_);
  cache_[cache_next_] = {epoch, cum};
  cache_next_ = 1 - cache_next_;
  return cum;
}

namespace {

// Position j of the last document in `cum` whose start is <= token (skipping empty documents
// is left to the reader).
int64_t find_document(const std::vector<int64_t>& cum, int64_t token) {
  auto it = std::upper_bound(cum.begin(), cum.end(), token);
  return static_cast<int64_t>(it - cum.begin()) - 1;
}

}  // namespace

SampleLocation GptSamples::locate(int64_t k) const {
  SampleLocation loc;
  loc.epoch = k / num_samples_;
  loc.sample = sample_for(k);
  auto cum = epoch_cumulative(loc.epoch);
  const int64_t begin = loc.sample * seq_length_;
  loc.doc_pos = find_document(*cum, begin);
  loc.offset = begin - (*cum)[loc.doc_pos];
  loc.document = document_at(loc.epoch, loc.doc_pos);
  return loc;
}

void GptSamples::read(int64_t k, int32_t* out) const {
  LATTICE_CHECK(k >= 0, "negative sample counter {}", k);
  const int64_t epoch = k / num_samples_;
  const int64_t s = sample_for(k);
  if (!shuffle_) {
    read_sample(s, out);
    return;
  }
  auto cum = epoch_cumulative(epoch);
  const EpochPermutation perm(documents_.size(), doc_seed_, static_cast<uint64_t>(epoch));
  const int64_t begin = s * seq_length_;
  int64_t j = find_document(*cum, begin);
  int64_t offset = begin - (*cum)[j];
  int64_t count = seq_length_ + 1;
  while (count > 0) {
    LATTICE_CHECK(j < documents_.size(), "sample {} runs past the end of epoch {} of {}", s, epoch,
                  dataset_->prefix());
    const int64_t len = (*cum)[j + 1] - (*cum)[j];
    const int64_t take = std::min(count, len - offset);
    if (take > 0) {
      dataset_->read(documents_.begin + perm(j), offset, take, out);
      out += take;
      count -= take;
    }
    ++j;
    offset = 0;
  }
}

std::string GptSamples::describe(int64_t k) const {
  return fmt::format("dataset {}, {} split, sample counter {} (epoch {}, in-epoch sample {})", dataset_->prefix(),
                     label_, k, k / num_samples_, sample_for(k));
}

void GptSamples::read_tokens(int64_t begin, int64_t count, int32_t* out) const {
  LATTICE_CHECK(begin >= 0 && count >= 0 && begin + count <= num_tokens(),
                "tokens [{}, {}) outside the {} tokens of the {} split of {}", begin, begin + count, num_tokens(),
                label_, dataset_->prefix());
  const std::vector<int64_t>& cum = *cumulative_;
  int64_t j = find_document(cum, begin);
  int64_t offset = begin - cum[j];
  while (count > 0) {
    const int64_t len = cum[j + 1] - cum[j];
    const int64_t take = std::min(count, len - offset);
    if (take > 0) {
      dataset_->read(documents_.begin + j, offset, take, out);
      out += take;
      count -= take;
    }
    ++j;
    offset = 0;
  }
}

}  // namespace lattice
