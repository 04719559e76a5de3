// `lattice generate`: flags, tokenizer, sampling loop, output.
#include "trainer/generate_command.h"

#include <chrono>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "trainer/data_command.h"
#include "trainer/data_tokenizer.h"
#include "trainer/text_generator.h"

namespace lattice {

void add_generate_options(CLI::App* cmd, GenerateOptions& o) {
  cmd->add_option("--prompt,-p", o.prompt, "text to continue (default: empty = start a new document)");
  add_tokenizer_options(cmd, o.tokenizer);
  cmd->add_option("--max-new-tokens,-n", o.sampling.max_new_tokens, "tokens to generate at most (default 64)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--temperature,-t", o.sampling.temperature,
                  "softmax temperature; 0 = greedy (always the most likely token) (default 1)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--top-k,-k", o.sampling.top_k, "sample among the k most likely tokens; 0 = all (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  cmd->add_option("--seed,-s", o.sampling.seed, "seed of the sampling; a seed gives the same text (default 1234)");
}

void generate_text(const Config& config, ParameterStore& params, const GenerateOptions& o) {
  const std::unique_ptr<Tokenizer> tokenizer = resolve_tokenizer(o.tokenizer, config);
  std::vector<int32_t> context = tokenizer->encode(o.prompt);
  if (context.empty()) context.push_back(tokenizer->eod_id());  // an empty prompt starts a new document
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
