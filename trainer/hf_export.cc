// HF export of weights, config.json with eos/bos ids, and the tokenizer files.
#include "trainer/hf_export.h"

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/hf_interop.h"
#include "checkpoint/safetensors.h"
#include "data/bpe_model.h"
#include "data/file_io.h"
#include "kernels/error.h"
#include "trainer/data_tokenizer.h"

namespace lattice {

namespace {

using nlohmann::json;

// The byte tokenizer as a Hugging Face tokenizer.json: ByteLevel without the regex split, so no
// text is ever merged and byte b is the vocabulary entry of its byte-level character, id b.
std::string byte_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_to_unicode()[static_cast<size_t>(b)]] = b;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", false}};
  const json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", ByteTokenizer::kEod}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
         {"rstrip", false}, {"normalized", false}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", json::array()}}},
  };
  return j.dump(2) + "\n";
}

// The tokenizer files an export writes, of one kind or another: what Hugging Face tools load with
// the model (AutoTokenizer prefers tokenizer.json; the slow GPT-2 tokenizer reads vocab.json and
// merges.txt).
const std::vector<std::string> kTokenizerFiles = {"tokenizer.json", "vocab.json", "merges.txt"};

}  // namespace

void export_hf_tokenizer(const TokenizerRecord& record, const ModelConfig& model, const std::string& output_dir) {
  const auto out = [&](const std::string& name) { return (std::filesystem::path(output_dir) / name).string(); };
  const TokenizerOptions& o = record.options;
  // Another kind's files from an earlier save would be loaded instead of this tokenizer: they go.
  std::vector<std::string> removed;
  for (const std::string& name : kTokenizerFiles) {
    const bool ours = o.type == "gpt2-bpe" ? name != "tokenizer.json" : name == "tokenizer.json";
    std::error_code ec;
    if (!ours && std::filesystem::remove(out(name), ec)) removed.push_back(name);
  }
  if (!removed.empty())
    spdlog::warn("export: removed {} from '{}', an earlier save's tokenizer, which Hugging Face tools would load "
                 "instead of this {} tokenizer",
                 fmt::join(removed, ", "), output_dir, o.type);
  if (o.type == "byte") {
    write_file_atomically(out("tokenizer.json"), byte_tokenizer_json());
  } else if (o.type == "gpt2-bpe") {
    write_file_atomically(out("vocab.json"), read_whole_file(o.vocab_file, "tokenizer file"));
    write_file_atomically(out("merges.txt"), read_whole_file(o.merges_file, "tokenizer file"));
  } else {
    write_file_atomically(out("tokenizer.json"), read_whole_file(o.tokenizer_file, "tokenizer file"));
  }
  const std::string eod = make_recorded_tokenizer(record)->decode(std::vector<int32_t>{record.eod_id});
  const json config = {{"tokenizer_class", o.type == "gpt2-bpe" ? "GPT2Tokenizer" : "PreTrainedTokenizerFast"},
                       {"eos_token", eod},
                       {"bos_token", eod},
                       {"model_max_length", model.seq_length},
                       {"clean_up_tokenization_spaces", false}};
  write_file_atomically(out("tokenizer_config.json"), config.dump(2) + "\n");
}

namespace {

// Why the export has no tokenizer to write: no data named, data not found from here (a relative
// data.path read from another directory: worth a warning), or data without a record.
void log_why_no_tokenizer(const DataConfig& data, const std::string& output_dir) {
  const std::vector<std::pair<std::string, std::string>> prefixes = dataset_prefixes(data);
  if (prefixes.empty()) {
    spdlog::info("no data.path to take the tokenizer from: {} holds the model only", output_dir);
    return;
  }
  for (const auto& named : prefixes) {
    const std::string& prefix = named.second;  // named.first: data.path or data.blend[i][1]
    std::error_code ec;
    if (!std::filesystem::exists(prefix + ".bin", ec)) {
      spdlog::warn("the data '{}' is not found{}, so its tokenizer is not exported: {} holds the model only; --set "
                   "data.path=/absolute/prefix to export it",
                   prefix, where_not_found(prefix), output_dir);
      return;
    }
  }
  spdlog::info("no tokenizer recorded with the data (prepared by Megatron-LM or an older lattice, or a blend of "
               "different ones): {} holds the model only",
               output_dir);
}

}  // namespace

void export_hf_model(const Config& config, const ParameterStore& store, const std::string& output_dir, DType dtype) {
  std::optional<TokenizerRecord> record = data_tokenizer_record(config.data);
  if (record && record->vocab_size > config.model.vocab_size) {
    spdlog::warn("not exporting the tokenizer of {}: its {} ids do not fit model.vocab_size {}", record->path,
                 record->vocab_size, config.model.vocab_size);
    record.reset();
  }
  export_hf(config.model, store, output_dir, record ? std::optional<int32_t>(record->eod_id) : std::nullopt, dtype);
  if (!record) {
    log_why_no_tokenizer(config.data, output_dir);
    // Not removed: they may be this model's tokenizer, put there by hand. But say they are not ours.
    std::vector<std::string> present;
    for (const std::string& name : kTokenizerFiles) {
      std::error_code ec;
      if (std::filesystem::exists(std::filesystem::path(output_dir) / name, ec)) present.push_back(name);
    }
    if (!present.empty())
      spdlog::warn("export: '{}' holds {} that this export did not write (an earlier save's?): Hugging Face tools "
                   "load them with this model; delete them unless they are this model's tokenizer",
                   output_dir, fmt::join(present, ", "));
    return;
  }
  export_hf_tokenizer(*record, config.model, output_dir);
  spdlog::info("exported the {} tokenizer of {} to {} (eos/bos token id {})", record->options.type, record->path,
               output_dir, record->eod_id);
}

}  // namespace lattice
