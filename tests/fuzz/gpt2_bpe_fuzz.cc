// Fuzz target: GPT-2's vocab.json + merges.txt (`lattice data prepare --tokenizer gpt2-bpe`)
// loaded, then a fixed text encoded and decoded. Input: vocab.json, a NUL byte, merges.txt.
// Only InputError may come out.
#include <cstdint>

#include "data/bpe_loaders.h"
#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = lattice::fuzz::split_nul(data, size);
  const std::string vocab = lattice::fuzz::write_file("vocab.json", parts[0]);
  const std::string merges = lattice::fuzz::write_file("merges.txt", parts.size() > 1 ? parts[1] : "");
  try {
    const auto tokenizer = lattice::load_gpt2_bpe(vocab, merges, "");
    tokenizer->decode(tokenizer->encode("Hello, world! <|endoftext|> It's 2024:\n\tcaf\xc3\xa9  ab abc"));
  } catch (const lattice::InputError&) {
  }
  return 0;
}
