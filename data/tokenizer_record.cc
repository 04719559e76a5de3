// Writing and reading PREFIX.tokenizer.json and the tokenizer files copied beside a dataset.
#include "data/tokenizer_record.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "kernels/error.h"

namespace lattice {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The record keys of the file flags, and the suffix of each copy: PREFIX + suffix.
struct RecordedFile {
  const char* key;
  const char* suffix;
  const char* flag;
  std::string TokenizerOptions::*field;
};
constexpr RecordedFile kFiles[] = {
    {"vocab_file", ".vocab.json", "--vocab-file", &TokenizerOptions::vocab_file},
    {"merges_file", ".merges.txt", "--merges-file", &TokenizerOptions::merges_file},
    {"tokenizer_file", ".hf_tokenizer.json", "--tokenizer-file", &TokenizerOptions::tokenizer_file},
};

// The sizes of the dataset files a record describes: another tool rewriting PREFIX.bin/.idx (a
// different corpus, Megatron-LM's preprocess_data.py) changes them; a copy (cp, rsync) keeps them.
json dataset_sizes(const std::string& prefix) {
  std::error_code ec;
  const auto bin = fs::file_size(prefix + ".bin", ec);
  const auto idx = fs::file_size(prefix + ".idx", ec);
  return ec ? json() : json{{"bin", bin}, {"idx", idx}};
}

}  // namespace

std::string tokenizer_record_path(const std::string& prefix) { return prefix + ".tokenizer.json"; }

TokenizerFileTexts read_tokenizer_files(const TokenizerOptions& options) {
  TokenizerFileTexts files;
  for (const RecordedFile& f : kFiles) {
    const std::string& source = options.*f.field;
    if (source.empty()) continue;
    std::error_code ec;
    if (!fs::exists(source, ec)) throw InputError(fmt::format("{} '{}' does not exist", f.flag, source));
    if (!fs::is_regular_file(source, ec))
      throw InputError(fmt::format("{} '{}' is not a regular file: the dataset keeps a copy of it, and a pipe "
                                   "(or <(...)) can be read only once; give the file itself",
                                   f.flag, source));
    files[source] = read_whole_file(source, "tokenizer file");
  }
  return files;
}

void write_tokenizer_record(const std::string& prefix, const TokenizerOptions& options, const Tokenizer& tokenizer,
                            const TokenizerFileTexts& files) {
  json j = {{"type", options.type},
            {"eod_token", options.eod_token},
            {"eod_id", tokenizer.eod_id()},
            {"vocab_size", tokenizer.vocab_size()},
            {"dataset_bytes", dataset_sizes(prefix)}};
  for (const RecordedFile& f : kFiles) {
    const std::string& source = options.*f.field;
    if (source.empty()) continue;
    const std::string copy = prefix + f.suffix;
    replace_file(copy, files.at(source));
    j[f.key] = fs::path(copy).filename().string();  // relative: the dataset directory may move
  }
  replace_file(tokenizer_record_path(prefix), j.dump(2) + "\n");
}

std::optional<TokenizerRecord> read_tokenizer_record(const std::string& prefix) {
  const std::string path = tokenizer_record_path(prefix);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  TokenizerRecord r;
  r.path = path;
  try {
    const json j = json::parse(read_whole_file(path, "tokenizer record"));
    r.options.type = j.at("type").get<std::string>();
    r.options.eod_token = j.at("eod_token").get<std::string>();
    r.eod_id = j.at("eod_id").get<int32_t>();
    r.vocab_size = j.at("vocab_size").get<int64_t>();
    const fs::path dir = fs::path(path).parent_path();
    for (const RecordedFile& f : kFiles)
      if (j.contains(f.key)) r.options.*f.field = (dir / j.at(f.key).get<std::string>()).string();
    // (A record written before lattice kept the sizes has none: trusted, as before.)
    const json now = dataset_sizes(prefix);
    if (j.contains("dataset_bytes") && j["dataset_bytes"].is_object() && now.is_object() && j["dataset_bytes"] != now)
      throw InputError(fmt::format(
          "tokenizer record '{}' describes a dataset of {} bytes (.bin) and {} (.idx), but {}.bin/.idx now hold {} "
          "and {}: they were replaced (by another corpus, or another tool), so the record's tokenizer may not be "
          "theirs; prepare the data again with `lattice data prepare`, or delete the record",
          path, j["dataset_bytes"].value("bin", uint64_t{0}), j["dataset_bytes"].value("idx", uint64_t{0}), prefix,
          now["bin"].get<uint64_t>(), now["idx"].get<uint64_t>()));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("tokenizer record '{}' is malformed ({}); prepare the dataset again with "
                                 "`lattice data prepare` or delete the file",
                                 path, e.what()));
  }
  return r;
}

std::string tokenizer_identity(const TokenizerRecord& r) {
  std::string identity = fmt::format("{}/{}/{}", r.options.type, r.vocab_size, r.eod_id);
  for (const RecordedFile& f : kFiles) {
    const std::string& file = r.options.*f.field;
    if (!file.empty()) identity += "/" + read_whole_file(file, "tokenizer file");
  }
  return identity;
}

std::unique_ptr<Tokenizer> make_recorded_tokenizer(const TokenizerRecord& r) {
  std::unique_ptr<Tokenizer> t = make_tokenizer(r.options);
  if (t->eod_id() != r.eod_id || t->vocab_size() != r.vocab_size)
    throw InputError(fmt::format("tokenizer record '{}': its files now give end-of-document id {} and vocabulary {}, "
                                 "but the dataset was prepared with {} and {}; prepare the dataset again",
                                 r.path, t->eod_id(), t->vocab_size(), r.eod_id, r.vocab_size));
  return t;
}

}  // namespace lattice
