// Resolving the tokenizer of a model from flags, its data's record or the byte default.
#include "trainer/data_tokenizer.h"

#include <filesystem>

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

std::string where_not_found(const std::string& prefix) {
  if (!std::filesystem::path(prefix).is_relative()) return "";
  std::error_code ec;
  return fmt::format(" from {} (a relative path is read from the current directory)",
                     std::filesystem::current_path(ec).string());
}

std::unique_ptr<Tokenizer> resolve_tokenizer(const TokenizerOptions& flags, const Config& config) {
  std::unique_ptr<Tokenizer> t;
  std::string source;
  check_tokenizer_flags_have_type(flags);
  if (!flags.type.empty()) {
    t = make_tokenizer(flags);
    source = "--tokenizer " + flags.type;
  } else if (const auto record = data_tokenizer_record(config.data)) {
    t = make_recorded_tokenizer(*record);
    source = record->path;
  } else {
    // A dataset that cannot be found says nothing of its tokenizer: the byte default would feed the
    // model ids of another vocabulary, and print text without a word of warning.
    for (const auto& [field, prefix] : dataset_prefixes(config.data)) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(prefix + ".idx", ec))
        throw InputError(fmt::format(
            "{} \"{}\": no dataset there{}, so the tokenizer recorded with it cannot be read: give the tokenizer "
            "(--tokenizer ...), or the dataset's path (--set {}=PATH)",
            field, prefix, where_not_found(prefix), field.rfind("data.blend", 0) == 0 ? "data.blend" : field));
    }
    t = std::make_unique<ByteTokenizer>();
    source = "the default: no --tokenizer given and no tokenizer recorded with the data (data.path)";
    if (!config.data.path.empty() || !config.data.blend.empty())
      spdlog::warn("no tokenizer is recorded with the data (a dataset prepared by Megatron-LM or an older lattice): "
                   "using the byte tokenizer; if the model was trained with another, give it (--tokenizer ...)");
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
