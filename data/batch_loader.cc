// BatchLoader: sample counters → token rows in CPU tensors.
#include "data/batch_loader.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

std::shared_ptr<const IndexedDataset> open_dataset(const DataConfig& config) {
  if (config.path.empty()) {
    throw InputError(
        "data.path is empty: set it to a dataset prefix (PREFIX.bin + PREFIX.idx); create one with "
        "`lattice data prepare`");
  }
  return std::make_shared<const IndexedDataset>(config.path);
}

namespace {

GptSamples make_samples(const std::shared_ptr<const IndexedDataset>& ds, const DataConfig& config, Split split,
                        int64_t seq_length) {
  if (seq_length <= 0) throw InputError(fmt::format("model.seq_length must be positive, got {}", seq_length));
  auto ranges = split_document_ranges(config.split, ds->num_documents(), "data.split");
  return GptSamples(ds, ranges[static_cast<int>(split)], seq_length, config.shuffle, config.seed,
                    split_name(split));
}

}  // namespace

BatchLoader::BatchLoader(const DataConfig& config, Split split, int64_t seq_length, int64_t vocab_size)
    : BatchLoader(open_dataset(config), config, split, seq_length, vocab_size) {}

BatchLoader::BatchLoader(std::shared_ptr<const IndexedDataset> dataset, const DataConfig& config, Split split,
                         int64_t seq_length, int64_t vocab_size)
    : dataset_(std::move(dataset)),
      split_(split),
      vocab_size_(vocab_size),
      samples_(make_samples(dataset_, config, split, seq_length)) {}

void BatchLoader::micro_batch(int64_t global_batch_index, int64_t micro_index, int64_t micro_batch_size,
                              int64_t global_batch_size, Tensor& input_ids, Tensor& targets) const {
  LATTICE_CHECK(global_batch_index >= 0 && micro_index >= 0 && micro_batch_size > 0 &&
                    (micro_index + 1) * micro_batch_size <= global_batch_size,
                "micro-batch {} of size {} does not fit global batch {} of size {}", micro_index, micro_batch_size,
                global_batch_index, global_batch_size);
  LATTICE_CHECK(input_ids.defined() && input_ids.rank() == 2 && input_ids.dim(0) == micro_batch_size,
                "input_ids must be [micro_batch_size={}, seq_length], got {}", micro_batch_size,
                input_ids.defined() ? input_ids.describe() : "undefined");
  fill_samples(global_batch_index * global_batch_size + micro_index * micro_batch_size, input_ids, targets);
}

void BatchLoader::fill_samples(int64_t first_sample, Tensor& input_ids, Tensor& targets) const {
  const int64_t S = samples_.seq_length();
  for (const Tensor* t : {&input_ids, &targets}) {
    LATTICE_CHECK(t->defined() && t->device() == Device::kCpu && t->dtype() == DType::kI32 && t->rank() == 2 &&
                      t->dim(1) == S && t->dim(0) == input_ids.dim(0),
                  "input_ids/targets must be CPU i32 [rows, seq_length={}] of the same shape, got {} and {}", S,
                  input_ids.defined() ? input_ids.describe() : "undefined",
                  targets.defined() ? targets.describe() : "undefined");
  }
  LATTICE_CHECK(first_sample >= 0, "negative sample counter {}", first_sample);
  const int64_t rows = input_ids.dim(0);
  int32_t* in = input_ids.i32();
  int32_t* tg = targets.i32();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = first_sample + r;
    const int64_t s = samples_.sample_for(k);
    int32_t* in_row = in + r * S;
    int32_t* tg_row = tg + r * S;
    samples_.read_tokens(s * S, S, in_row);
    if (S > 1) std::memcpy(tg_row, in_row + 1, static_cast<size_t>(S - 1) * sizeof(int32_t));
    samples_.read_tokens(s * S + S, 1, tg_row + S - 1);
    if (vocab_size_ > 0) {
      auto check = [&](const int32_t* p, int64_t n, int64_t first_pos) {
        for (int64_t i = 0; i < n; ++i) {
          if (p[i] >= vocab_size_) {
            throw InputError(fmt::format(
                "dataset {}: token id {} (token {} of {} split, sample {}) is >= model.vocab_size {}; the "
                "dataset was made with a larger tokenizer: set model.vocab_size or re-run `lattice data "
                "prepare` with the model's tokenizer",
                dataset_->prefix(), p[i], s * S + first_pos + i, split_name(split_), s, vocab_size_));
          }
        }
      };
      check(in_row, S, 0);
      check(tg_row + S - 1, 1, S);
    }
  }
}

int32_t BatchLoader::max_token_id() const {
  int32_t best = -1;
  std::vector<int32_t> buf;
  const int64_t total = samples_.num_tokens();
  for (int64_t pos = 0; pos < total; pos += 1 << 16) {
    buf.resize(std::min<int64_t>(total - pos, 1 << 16));
    samples_.read_tokens(pos, static_cast<int64_t>(buf.size()), buf.data());
    for (int32_t t : buf) best = std::max(best, t);
  }
  return best;
}

}  // namespace lattice
