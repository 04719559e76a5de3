// Dataset checks at start: files, then the largest token id against model.vocab_size.
#include "trainer/dataset_check.h"

#include <fmt/format.h>

#include "data/dataset_stats.h"
#include "data/indexed_dataset.h"

namespace lattice {

void check_datasets(const Config& config) {
  check_dataset_files_exist(config.data);
  const int64_t vocab = config.model.vocab_size;
  for (const auto& [field, prefix] : dataset_prefixes(config.data)) {
    DatasetStats stats;
    try {
      stats = dataset_stats(IndexedDataset(prefix));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} \"{}\": {}", field, prefix, e.what()));
    }
    if (stats.max_token_id >= vocab)
      throw InputError(fmt::format(
          "{} \"{}\": dataset file '{}.bin' holds token id {} (its largest), but model.vocab_size is {}: ids must be "
          "below it. Set model.vocab_size to at least {} (the vocabulary of the tokenizer that made the dataset), or "
          "re-run `lattice data prepare` with the model's tokenizer",
          field, prefix, prefix, stats.max_token_id, vocab, stats.max_token_id + 1));
  }
}

}  // namespace lattice
