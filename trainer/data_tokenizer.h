// Which tokenizer goes with a model: the one recorded with its training data (PREFIX.tokenizer.json,
// see data/tokenizer_record.h), explicit tokenizer flags, or the byte tokenizer.
#pragma once

#include <memory>
#include <optional>

#include "data/tokenizer.h"
#include "data/tokenizer_record.h"
#include "trainer/config.h"

namespace lattice {

// The record of data.path, or of data.blend's datasets when those with a record record the same
// tokenizer (tokenizer_identity); nullopt when there is none.
std::optional<TokenizerRecord> data_tokenizer_record(const DataConfig& data);

// For a message about a dataset prefix that was not found: " from DIR (a relative path is read from
// the current directory)" when it is relative, else "".
std::string where_not_found(const std::string& prefix);

// `flags` when its type is set (the --tokenizer flags), else the data's record, else the byte
// tokenizer (what `lattice data prepare` uses by default). InputError when its vocabulary is
// larger than model.vocab_size (the model could not read the prompt's ids).
std::unique_ptr<Tokenizer> resolve_tokenizer(const TokenizerOptions& flags, const Config& config);

}  // namespace lattice
