// The tokenizer a dataset was prepared with, recorded beside it (PREFIX.tokenizer.json plus copies
// of its files) so that `lattice generate`, samples during training and the HF export use it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "data/tokenizer.h"

namespace lattice {

struct TokenizerRecord {
  std::string path;          // the PREFIX.tokenizer.json it was read from
  TokenizerOptions options;  // file flags name the copies beside the dataset
  int32_t eod_id = 0;
  int64_t vocab_size = 0;
};

// PREFIX.tokenizer.json.
std::string tokenizer_record_path(const std::string& prefix);

// The contents of the tokenizer files `options` names, by path, read before the dataset is written:
// the record copies these bytes, so a file changed or removed while the data is prepared cannot
// leave a new dataset without its record. An InputError naming the flag for a file that is not a
// regular file (a pipe, `<(...)`: the record keeps a copy of the file itself) or cannot be read. The
// tokenizer is made from these bytes (make_tokenizer's `texts`).
TokenizerFileTexts read_tokenizer_files(const TokenizerOptions& options);

// Writes PREFIX.tokenizer.json describing `tokenizer` (made from `options`) and copies its files
// (`files`, from read_tokenizer_files) beside the dataset, so the dataset directory is
// self-contained: gpt2-bpe PREFIX.vocab.json + PREFIX.merges.txt, hf PREFIX.hf_tokenizer.json; byte
// has no files. Each file is written under a temporary name and renamed into place.
void write_tokenizer_record(const std::string& prefix, const TokenizerOptions& options, const Tokenizer& tokenizer,
                            const TokenizerFileTexts& files);

// The record of PREFIX, or nullopt when the dataset has none (prepared by an older lattice or by
// Megatron-LM). A malformed record is an InputError naming the file.
std::optional<TokenizerRecord> read_tokenizer_record(const std::string& prefix);

// Equal for two records exactly when their datasets' ids mean the same text: the type, end-of-document
// id and vocabulary size, and the bytes of the tokenizer files (two BPE tokenizers of one vocabulary
// size may still number their tokens differently).
std::string tokenizer_identity(const TokenizerRecord& record);

// The recorded tokenizer; InputError naming the record if its files no longer give the recorded
// end-of-document id and vocabulary size.
std::unique_ptr<Tokenizer> make_recorded_tokenizer(const TokenizerRecord& record);

}  // namespace lattice
