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

std::array<DocumentRange, 3> split_document_ranges(const std::string& split, int64_t num_documents,
                                                   const std::string& field) {
  std::array<double, 3> w = parse_split_weights(split, field);
  const double total = w[0] + w[1] + w[2];
  int64_t bounds[4];
  double cum = 0;
  bounds[0] = 0;
  for (int i = 1; i < 3; ++i) {
    cum += w[i - 1];
    bounds[i] = static_cast<int64_t>(std::floor(static_cast<double>(num_documents) * (cum / total) + 0.5));
    bounds[i] = std::clamp<int64_t>(bounds[i], bounds[i - 1], num_documents);
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
      label_(std::move(split_label)) {
  LATTICE_CHECK(dataset_ != nullptr, "GptSamples needs a dataset");
  LATTICE_CHECK(seq_length_ > 0, "seq_length must be positive, got {}", seq_length_);
  LATTICE_CHECK(documents_.begin >= 0 && documents_.begin <= documents_.end &&
                    documents_.end <= dataset_->num_documents(),
                "document range [{}, {}) outside the {} documents of {}", documents_.begin, documents_.end,
                dataset_->num_documents(), dataset_->prefix());
  cumulative_.resize(documents_.size() + 1);
  cumulative_[0] = 0;
  for (int64_t j = 0; j < documents_.size(); ++j) {
    cumulative_[j + 1] = cumulative_[j] + dataset_->sequence_length(documents_.begin + j);
  }
  const int64_t tokens = cumulative_.back();
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

void GptSamples::read_tokens(int64_t begin, int64_t count, int32_t* out) const {
  LATTICE_CHECK(begin >= 0 && count >= 0 && begin + count <= num_tokens(),
                "tokens [{}, {}) outside the {} tokens of the {} split of {}", begin, begin + count, num_tokens(),
                label_, dataset_->prefix());
  // Last document whose start is <= begin.
  auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), begin);
  int64_t j = static_cast<int64_t>(it - cumulative_.begin()) - 1;
  int64_t offset = begin - cumulative_[j];
  while (count > 0) {
    const int64_t len = cumulative_[j + 1] - cumulative_[j];
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
