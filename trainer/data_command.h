// The flags of `lattice data prepare` and `lattice data inspect`, mapped onto their options.
#pragma once

#include <CLI/CLI.hpp>

#include "data/inspect.h"
#include "data/prepare.h"
#include "data/tokenizer.h"

namespace lattice {

// --tokenizer, --vocab-file, --merges-file, --tokenizer-file, --eod-token.
void add_tokenizer_options(CLI::App* command, TokenizerOptions& options);
void add_prepare_options(CLI::App* command, PrepareOptions& options);
void add_inspect_options(CLI::App* command, InspectOptions& options);

}  // namespace lattice
