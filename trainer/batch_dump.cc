// The samples of one global batch, read through the same loader training uses.
#include "trainer/batch_dump.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/batch_loader.h"
#include "kernels/error.h"

namespace lattice {

std::string dump_global_batch(const Config& c, Split split, int64_t step) {
  const bool train = split == Split::kTrain;
  const int64_t last = train ? c.training.train_iters : c.training.eval_iters;
  if (!train && c.training.eval_interval <= 0)
    throw InputError("--split valid: training.eval_interval is 0, so the run never reads the validation split");
  if (step < 1 || step > last)
    throw InputError(fmt::format("--step {}: {} runs {} {}, numbered from 1", step, train ? "training" : "an evaluation",
                                 last, train ? "steps (training.train_iters)" : "batches (training.eval_iters)"));
  const int64_t S = c.model.seq_length, B = c.training.global_batch_size;
  const auto samples = make_split_samples(c.data, open_datasets(c.data), split, S);
  LoaderOptions lo;
  lo.micro_batch_size = c.training.micro_batch_size;
  lo.global_batch_size = B;
  lo.vocab_size = c.model.vocab_size;
  lo.prefetch = 0;
  const BatchLoader loader(samples, lo);
  Tensor ids = Tensor::empty({B, S}, DType::kI32), targets = Tensor::empty({B, S}, DType::kI32);
  const int64_t first = (step - 1) * B;
  loader.fill_samples(first, ids, targets);
  std::string out;
  for (int64_t row = 0; row < B; ++row) {
    std::vector<int32_t> tokens(ids.i32() + row * S, ids.i32() + (row + 1) * S);
    tokens.push_back(targets.i32()[row * S + S - 1]);
    const nlohmann::ordered_json line = {{"step", step},
                                        {"row", row},
                                        {"sample", first + row},
                                        {"source", samples->describe(first + row)},
                                        {"tokens", tokens}};
    out += line.dump() + "\n";
  }
  return out;
}

}  // namespace lattice
