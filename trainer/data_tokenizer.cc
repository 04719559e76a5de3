// Resolving the tokenizer of a model from flags, its data's record or the byte default.
#include "trainer/data_tokenizer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

std::optional<TokenizerRecord> data_tokenizer_record(const DataConfig& data) {
  // Datasets without a record (Megatron-LM's) are trusted to share the others' tokenizer, as the
  // start-of-run blend check (trainer/dataset_check.h) trusts them.
  std::optional<TokenizerRecord> first;
  std::string first_identity;
  for (const auto& [field, prefix] : dataset_prefixes(data)) {
    std::optional<TokenizerRecord> r = read_tokenizer_record(prefix);
    if (!r) continue;
    std::string identity = tokenizer_identity(*r);
    if (!first) {
      first = std::move(r);
      first_identity = std::move(identity);
    } else if (identity != first_identity) {
      spdlog::warn("data.blend: {} and {} record different tokenizers; none is used", first->path, r->path);
      return std::nullopt;
    }
  }
  return first;
}

std::unique_ptr<Tokenizer> resolve_tokenizer(const TokenizerOptions& flags, const Config& config) {
  std::unique_ptr<Tokenizer> t;
  std::string source;
  if (!flags.type.empty()) {
    t = make_tokenizer(flags);
    source = "--tokenizer " + flags.type;
  } else if (const auto record = data_tokenizer_record(config.data)) {
    t = make_recorded_tokenizer(*record);
    source = record->path;
  } else {
    t = std::make_unique<ByteTokenizer>();
    source = "the default: no --tokenizer given and no tokenizer recorded with the data (data.path)";
  }
  if (t->vocab_size() > config.model.vocab_size)
    throw InputError(fmt::format("the {} tokenizer ({}) has {} ids but model.vocab_size is {}: give the tokenizer "
                                 "the model was trained with (--tokenizer ...)",
                                 t->name(), source, t->vocab_size(), config.model.vocab_size));
  spdlog::info("tokenizer: {} ({}; vocabulary {}, end-of-document id {})", t->name(), source, t->vocab_size(),
               t->eod_id());
  return t;
}

}  // namespace lattice
