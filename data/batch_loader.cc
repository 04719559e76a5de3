// BatchLoader: sample counters → token rows in CPU tensors, with DP slicing and prefetch.
#include "data/batch_loader.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "data/blended_dataset.h"
#include "data/epoch_permutation.h"
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

std::vector<std::shared_ptr<const IndexedDataset>> open_datasets(const DataConfig& config) {
  if (!config.path.empty() && !config.blend.empty())
    throw InputError("data.path and data.blend are both set: set exactly one of them");
  if (config.blend.empty()) {
    if (config.path.empty())
      throw InputError(
          "neither data.path nor data.blend is set: set data.path to a dataset prefix (PREFIX.bin + "
          "PREFIX.idx) or data.blend to [[weight, prefix], ...]; create datasets with `lattice data prepare`");
    return {open_dataset(config)};
  }
  std::vector<std::shared_ptr<const IndexedDataset>> out;
  for (size_t i = 0; i < config.blend.size(); ++i) {
    if (config.blend[i].prefix.empty()) throw InputError(fmt::format("data.blend[{}][1] is an empty prefix", i));
    try {
      out.push_back(std::make_shared<const IndexedDataset>(config.blend[i].prefix));
    } catch (const InputError& e) {
      throw InputError(fmt::format("data.blend[{}][1]: {}", i, e.what()));
    }
  }
  return out;
}

uint64_t split_seed(uint64_t data_seed, Split split, int64_t dataset) {
  // Train split of the first dataset: data.seed itself; the others: unrelated derived seeds.
  if (split == Split::kTrain && dataset == 0) return data_seed;
  return splitmix64(data_seed ^ splitmix64((static_cast<uint64_t>(split) << 32) + static_cast<uint64_t>(dataset)));
}

std::shared_ptr<const SampleSource> make_split_samples(const DataConfig& config,
                                                       const std::vector<std::shared_ptr<const IndexedDataset>>& datasets,
                                                       Split split, int64_t seq_length) {
  if (seq_length <= 0) throw InputError(fmt::format("model.seq_length must be positive, got {}", seq_length));
  LATTICE_CHECK(!datasets.empty(), "make_split_samples needs at least one dataset");
  const bool blended = !config.blend.empty();
  LATTICE_CHECK(!blended || config.blend.size() == datasets.size(), "{} datasets for {} data.blend entries",
                datasets.size(), config.blend.size());
  std::vector<std::shared_ptr<const SampleSource>> sources;
  std::vector<double> weights;
  for (size_t i = 0; i < datasets.size(); ++i) {
    auto ranges = split_document_ranges(config.split, datasets[i]->num_documents(), "data.split");
    const std::string label =
        blended ? fmt::format("{} (data.blend[{}])", split_name(split), i) : std::string(split_name(split));
    sources.push_back(std::make_shared<const GptSamples>(datasets[i], ranges[static_cast<int>(split)], seq_length,
                                                         config.shuffle, split_seed(config.seed, split, i), label));
    weights.push_back(blended ? config.blend[i].weight : 1.0);
  }
  if (!blended) return sources[0];
  return std::make_shared<const BlendedSamples>(std::move(sources), std::move(weights));
}

BatchLoader::BatchLoader(std::shared_ptr<const SampleSource> samples, LoaderOptions options, int64_t consumed)
    : samples_(std::move(samples)), options_(options) {
  LATTICE_CHECK(samples_ != nullptr, "BatchLoader needs samples");
  const LoaderOptions& o = options_;
  LATTICE_CHECK(o.micro_batch_size > 0 && o.dp_size > 0 && o.dp_rank >= 0 && o.dp_rank < o.dp_size &&
                    o.global_batch_size > 0 && o.global_batch_size % (o.micro_batch_size * o.dp_size) == 0,
                "loader: global batch {} must be a positive multiple of micro batch {} x dp size {} (dp rank {})",
                o.global_batch_size, o.micro_batch_size, o.dp_size, o.dp_rank);
  LATTICE_CHECK(o.prefetch >= 0, "loader: prefetch must be >= 0, got {}", o.prefetch);
  seek(consumed);
}

BatchLoader::~BatchLoader() = default;  // the prefetcher joins its thread

int64_t BatchLoader::micro_batches_per_step() const {
  return options_.global_batch_size / (options_.micro_batch_size * options_.dp_size);
}

int64_t BatchLoader::first_sample_of_step(int64_t t) const {
  const int64_t M = micro_batches_per_step(), g = t / M, m = t % M;
  const LoaderOptions& o = options_;
  return g * o.global_batch_size + o.dp_rank * (o.global_batch_size / o.dp_size) + m * o.micro_batch_size;
}

void BatchLoader::seek(int64_t consumed) {
  const int64_t per_step = options_.micro_batch_size * options_.dp_size;
  if (consumed < 0 || consumed % per_step != 0)
    throw InputError(fmt::format("consumed samples {} must be a non-negative multiple of micro_batch_size x "
                                 "data-parallel size = {}",
                                 consumed, per_step));
  prefetcher_.reset();  // joins the old thread before the position changes
  step_ = consumed / per_step;
  start_prefetch();
}

void BatchLoader::start_prefetch() {
  if (options_.prefetch == 0) return;
  const int64_t mb = options_.micro_batch_size, S = samples_->seq_length();
  prefetcher_ = std::make_unique<Prefetcher<Rows>>(step_, options_.prefetch, [this, mb, S](int64_t t, Rows& rows) {
    rows.ids.resize(static_cast<size_t>(mb * S));
    rows.targets.resize(static_cast<size_t>(mb * S));
    fill_rows(first_sample_of_step(t), mb, rows.ids.data(), rows.targets.data());
  });
}

namespace {

void check_tensors(const Tensor& input_ids, const Tensor& targets, int64_t rows, int64_t S) {
  for (const Tensor* t : {&input_ids, &targets}) {
    LATTICE_CHECK(t->defined() && t->device() == Device::kCpu && t->dtype() == DType::kI32 && t->rank() == 2 &&
                      t->dim(1) == S && (rows < 0 ? t->dim(0) == input_ids.dim(0) : t->dim(0) == rows),
                  "input_ids/targets must be CPU i32 [rows{}, seq_length={}] of the same shape, got {} and {}",
                  rows < 0 ? std::string() : fmt::format("={}", rows), S,
                  input_ids.defined() ? input_ids.describe() : "undefined",
                  targets.defined() ? targets.describe() : "undefined");
  }
}

}  // namespace

void BatchLoader::next(Tensor& input_ids, Tensor& targets) {
  const int64_t mb = options_.micro_batch_size, S = samples_->seq_length();
  check_tensors(input_ids, targets, mb, S);
  if (prefetcher_) {
    Rows rows = prefetcher_->next();
    std::memcpy(input_ids.i32(), rows.ids.data(), rows.ids.size() * sizeof(int32_t));
    std::memcpy(targets.i32(), rows.targets.data(), rows.targets.size() * sizeof(int32_t));
  } else {
    fill_rows(first_sample_of_step(step_), mb, input_ids.i32(), targets.i32());
  }
  ++step_;
}

void BatchLoader::micro_batch(int64_t g, int64_t m, Tensor& input_ids, Tensor& targets) const {
  const int64_t M = micro_batches_per_step();
  LATTICE_CHECK(g >= 0 && m >= 0 && m < M, "micro-batch {} of global batch {} outside the {} per rank", m, g, M);
  check_tensors(input_ids, targets, options_.micro_batch_size, samples_->seq_length());
  fill_rows(first_sample_of_step(g * M + m), options_.micro_batch_size, input_ids.i32(), targets.i32());
}

void BatchLoader::fill_samples(int64_t first_sample, Tensor& input_ids, Tensor& targets) const {
  check_tensors(input_ids, targets, -1, samples_->seq_length());
  fill_rows(first_sample, input_ids.dim(0), input_ids.i32(), targets.i32());
}

void BatchLoader::fill_rows(int64_t first_sample, int64_t rows, int32_t* in, int32_t* tg) const {
  LATTICE_CHECK(first_sample >= 0, "negative sample counter {}", first_sample);
  const int64_t S = samples_->seq_length();
  std::vector<int32_t> buf(static_cast<size_t>(S + 1));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = first_sample + r;
    samples_->read(k, buf.data());
    if (options_.vocab_size > 0) {
      for (int64_t i = 0; i <= S; ++i) {
        if (buf[i] >= options_.vocab_size) {
          throw InputError(fmt::format(
              "token id {} (token {} of {}) is >= model.vocab_size {}; the dataset was made with a larger "
              "tokenizer: set model.vocab_size or re-run `lattice data prepare` with the model's tokenizer",
              buf[i], i, samples_->describe(k), options_.vocab_size));
        }
      }
    }
    std::memcpy(in + r * S, buf.data(), static_cast<size_t>(S) * sizeof(int32_t));
    std::memcpy(tg + r * S, buf.data() + 1, static_cast<size_t>(S) * sizeof(int32_t));
  }
}

}  // namespace lattice
