// `lattice generate`: flags, tokenizer, sampling loop, output.
#include "trainer/generate_command.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "trainer/data_command.h"
#include "trainer/data_tokenizer.h"
#include "trainer/text_generator.h"

namespace lattice {

namespace {

// --temperature: CLI::Range lets NaN through (every comparison with it is false), and a NaN
// temperature would reach the sampler; infinities and NaN are refused here, naming the value.
CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (end != value.c_str() && *end == '\0' && !std::isfinite(x))
          return "'" + value + "' is not a finite number: give a temperature from 0 (greedy) to 1e6";
        return "";
      },
      "FINITE");
}

// --seed: an unsigned 64-bit option would take "-1" as 2^64 - 1, and a number past 2^64 - 1 as
// 2^64 - 1: both are refused, naming the value.
CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::string range = fmt::format("give an integer from 0 to {}", std::numeric_limits<uint64_t>::max());
        const size_t first = value.find_first_not_of(" \t");
        if (first != std::string::npos && value[first] == '-') {
          errno = 0;
          char* end = nullptr;
          const long long x = std::strtoll(value.c_str(), &end, 10);
          if (errno == ERANGE || x != 0) return "'" + value + "' is negative: " + range;
          return "";
        }
        errno = 0;
        char* end = nullptr;
        std::strtoull(value.c_str(), &end, 0);
        if (errno == ERANGE && end != value.c_str()) return "'" + value + "' is too large: " + range;
        return "";
      },
      "UINT64");
}

}  // namespace

void add_generate_options(CLI::App* cmd, GenerateOptions& o) {
  cmd->add_option("--prompt,-p", o.prompt, "text to continue (default: empty = start a new document)");
  add_tokenizer_options(cmd, o.tokenizer);
  cmd->add_option("--max-new-tokens,-n", o.sampling.max_new_tokens, "tokens to generate at most (default 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--temperature,-t", o.sampling.temperature,
                  "softmax temperature; 0 = greedy (always the most likely token) (default 1)")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--top-k,-k", o.sampling.top_k, "sample among the k most likely tokens; 0 = all (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  cmd->add_option("--seed,-s", o.sampling.seed, "seed of the sampling, 0 to 2^64 - 1; a seed gives the same text (default 1234)")
      ->check(seed_value());
}

void generate_text(const Config& config, ParameterStore& params, const GenerateOptions& o) {
  const std::unique_ptr<Tokenizer> tokenizer = resolve_tokenizer(o.tokenizer, config);
  std::vector<int32_t> context = tokenizer->encode(o.prompt);
  // A tokenizer whose vocabulary lacks some of the prompt's bytes drops them (as Hugging Face's
  // does), and a normalizer may rewrite it: the model then continues other text than the one
  // printed, so say which.
  if (const std::string seen = tokenizer->decode(context); seen != o.prompt)
    spdlog::warn("the {} tokenizer cannot represent the prompt exactly (its vocabulary lacks some of its bytes, or it "
                 "normalizes them): "
                 "the model continues \"{}\"",
                 tokenizer->name(), seen);
  // The prompt starts a document as the data's did: after the template's tokens (<|begin_of_text|>),
  // if the tokenizer has any; an empty prompt, after the end of the one before.
  const bool new_document = context.empty();
  const std::vector<int32_t> prefix = tokenizer->document_prefix();
  context.insert(context.begin(), prefix.begin(), prefix.end());
  if (new_document) context.insert(context.begin(), tokenizer->eod_id());
  TextGenerator generator(config.model, params);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> added = generator.generate(context, o.sampling, tokenizer->vocab_size(), tokenizer->eod_id());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool ended = !added.empty() && added.back() == tokenizer->eod_id();
  if (ended) added.pop_back();
  const std::string text = o.prompt + tokenizer->decode(added) + "\n";  // may hold any byte, NUL included
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  spdlog::info("generated {} token(s) in {:.2f} s{} (temperature {}, top-k {}, seed {})", added.size(), seconds,
               ended ? ", ending at the end-of-document token" : "", o.sampling.temperature, o.sampling.top_k,
               o.sampling.seed);
}

}  // namespace lattice
