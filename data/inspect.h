// `lattice data inspect PREFIX`: what an indexed dataset holds — counts, dtype, document length
// statistics and, with a tokenizer, the first tokens of the first documents decoded.
#pragma once

#include <cstdint>
#include <string>

#include "data/tokenizer.h"

namespace lattice {

struct InspectOptions {
  std::string prefix;            // PREFIX.bin + PREFIX.idx
  // Decodes with it; type empty: with the tokenizer recorded beside the dataset (PREFIX.tokenizer.json),
  // else token ids only.
  TokenizerOptions tokenizer{.type = ""};
  int64_t show = 3;              // documents to show
  int64_t tokens_per_doc = 32;   // first tokens shown of each
};

// The report as text (what the command prints). Throws InputError for a missing or corrupt
// dataset (naming the file) or an unknown tokenizer (naming --tokenizer).
std::string inspect_dataset(const InspectOptions& options);

}  // namespace lattice
