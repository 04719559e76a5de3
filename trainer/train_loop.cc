// The training entry points: train() opens the config's datasets and loaders, train_on() runs a
// TrainingSession on any micro-batch source.
#include "trainer/train_loop.h"

#include <memory>

#include <spdlog/spdlog.h>

#include "data/batch_loader.h"
#include "trainer/data_coverage.h"
#include "trainer/model_builder.h"
#include "trainer/training_checkpoint.h"
#include "trainer/training_session.h"

namespace lattice {

namespace {

// A loader read in order: the (g, m) the loop asks for is normally where the loader stands; any
// other position (validation restarting at batch 0) is a seek to its consumed-samples count.
MicroBatchSource dataset_source(std::shared_ptr<BatchLoader> loader) {
  return [loader](int64_t g, int64_t m, Tensor& ids, Tensor& targets) {
    const LoaderOptions& o = loader->options();
    const int64_t consumed = g * o.global_batch_size + m * o.micro_batch_size * o.dp_size;
    if (consumed != loader->consumed_samples()) loader->seek(consumed);
    loader->next(ids, targets);
  };
}

bool reads_data(const ModelLayout& layout) {
  for (int c = 0; c < layout.num_chunks(); ++c)
    if (layout.has_embedding(c) || layout.has_head(c)) return true;
  return false;
}

}  // namespace

TrainResult train(const Config& c, const TrainOptions& options) {
  const RankGrid grid = options.grid != nullptr ? *options.grid : RankGrid(1, 0, 1, 1, 1);
  // A run that resumes takes its weights from the checkpoint, not model.init_from (TrainingSession).
  const bool resumes = !c.model.init_from.empty() && checkpoint_to_load(c.checkpoint).has_value();
  validate_for_training(c, grid.world_size(), /*check_init_from=*/!resumes);
  const int64_t T = c.model.seq_length;
  LoaderOptions lo;
  lo.micro_batch_size = c.training.micro_batch_size;
  lo.global_batch_size = c.training.global_batch_size;
  lo.dp_rank = grid.dp_rank();
  lo.dp_size = grid.dp_size();  // dp rank r of D reads its contiguous B/D samples of each batch
  lo.vocab_size = c.model.vocab_size;
  // Middle pipeline stages read no tokens: they open no dataset (their sources are never called).
  if (!reads_data(model_layout(c, grid, grid.coords()))) {
    const MicroBatchSource none = [](int64_t, int64_t, Tensor&, Tensor&) {
      throw Error("internal: a middle pipeline stage asked for tokens");
    };
    return train_on(c, options, none, c.training.eval_interval > 0 ? none : MicroBatchSource{});
  }
  const auto datasets = open_datasets(c.data);
  const auto train_samples = make_split_samples(c.data, datasets, Split::kTrain, T);
  const auto valid_samples =
      c.training.eval_interval > 0 ? make_split_samples(c.data, datasets, Split::kValid, T) : nullptr;
  if (grid.rank() == 0) {
    const DataCoverage coverage = data_coverage(c, *train_samples, valid_samples.get());
    for (const std::string& line : coverage.info) spdlog::info("{}", line);
    for (const std::string& warning : coverage.warnings) spdlog::warn("{}", warning);
  }
  auto train_loader = std::make_shared<BatchLoader>(train_samples, lo);
  MicroBatchSource valid;
  if (valid_samples) valid = dataset_source(std::make_shared<BatchLoader>(valid_samples, lo));
  return train_on(c, options, dataset_source(train_loader), valid);
}

TrainResult train_on(const Config& c, const TrainOptions& options, const MicroBatchSource& train_data,
                     const MicroBatchSource& valid_data) {
  return TrainingSession(c, options, train_data, valid_data).run();
}

}  // namespace lattice
