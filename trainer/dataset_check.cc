// Dataset checks at start: files, then the largest token id against model.vocab_size.
#include "trainer/dataset_check.h"

#include <fmt/format.h>

#include "data/dataset_stats.h"
#include "data/file_io.h"
#include "data/indexed_dataset.h"
#include "data/tokenizer_record.h"

namespace lattice {

namespace {

std::string tokenizer_description(const TokenizerRecord& r) {
  return fmt::format("{} tokenizer (vocabulary {}, end-of-document id {})", r.options.type, r.vocab_size, r.eod_id);
}

// A blend mixes the token ids of its datasets: each must have been tokenized alike, or one id would
// mean different text in different samples. Datasets without a record (Megatron-LM's) are trusted.
void check_blend_tokenizers(const DataConfig& data) {
  if (data.blend.size() < 2) return;
  std::string first_field, first_prefix, first_identity;
  std::optional<TokenizerRecord> first;
  for (const auto& [field, prefix] : dataset_prefixes(data)) {
    std::optional<TokenizerRecord> record = read_tokenizer_record(prefix);
    if (!record) continue;
    std::string identity = tokenizer_identity(*record);
    if (!first) {
      first_field = field;
      first_prefix = prefix;
      first_identity = std::move(identity);
      first = std::move(record);
      continue;
    }
    if (identity == first_identity) continue;
    const std::string description = tokenizer_description(*record);
    const std::string first_description = tokenizer_description(*first);
    throw InputError(fmt::format(
        "data.blend mixes datasets of different tokenizers: {} \"{}\" was prepared with the {}{}, {} \"{}\" "
        "with the {}: one token id would mean different text. Prepare every dataset of a blend with the same "
        "tokenizer and flags (lattice data prepare --tokenizer ...)",
        first_field, first_prefix, first_description,
        description == first_description ? " and other tokenizer files" : "", field, prefix, description));
  }
}

}  // namespace

void check_datasets(const Config& config) {
  check_dataset_files_exist(config.data);
  check_blend_tokenizers(config.data);
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
