// `lattice generate`: the flags and the run — sample a continuation of a prompt from a model and
// print it, as llm.c prints samples while training.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "data/tokenizer.h"
#include "model/parameter_store.h"
#include "trainer/config.h"
#include "trainer/sampling.h"

namespace lattice {

struct GenerateOptions {
  std::string prompt;                      // --prompt ("" = start a new document)
  TokenizerOptions tokenizer{.type = ""};  // the --tokenizer flags of `data prepare`; unset = the data's
  SamplingOptions sampling;                // --max-new-tokens, --temperature, --top-k, --seed
};

// --prompt, --tokenizer ... (data/tokenizer.h, shared with `data prepare`), --max-new-tokens,
// --temperature, --top-k, --seed. (--checkpoint / --config are the caller's: they pick the model.)
// Out-of-range values exit 2 naming the flag: a temperature that is not finite (nan, inf) or outside
// [0, 1e6], a negative seed or one past 2^64 - 1, --top-k or --max-new-tokens outside their ranges.
void add_generate_options(CLI::App* command, GenerateOptions& options);

// Prints the prompt and its continuation to stdout (up to max_new_tokens, ending early at the
// end-of-document token, which is not printed).
void generate_text(const Config& config, ParameterStore& params, const GenerateOptions& options);

}  // namespace lattice
