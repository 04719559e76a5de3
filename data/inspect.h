// `lattice data inspect PREFIX`: what an indexed dataset holds — counts, dtype, document length
// statistics and, with a tokenizer, the first tokens of the first documents decoded.
#pragma once

#include <cstdint>
#include <string>

namespace lattice {

struct InspectOptions {
  std::string prefix;            // PREFIX.bin + PREFIX.idx
  std::string tokenizer;         // empty: show token ids only; else a make_tokenizer name ("byte", ...)
  int64_t show = 3;              // documents to show
  int64_t tokens_per_doc = 32;   // first tokens shown of each
};

// The report as text (what the command prints). Throws InputError for a missing or corrupt
// dataset (naming the file) or an unknown tokenizer (naming --tokenizer).
std::string inspect_dataset(const InspectOptions& options);

}  // namespace lattice
