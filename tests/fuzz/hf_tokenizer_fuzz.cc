// Fuzz target: a Hugging Face tokenizer.json (`lattice data prepare --tokenizer hf`) loaded, then
// a fixed text encoded and decoded. Input: the file's bytes. Only InputError may come out.
#include <cstdint>
#include <string_view>

#include "data/bpe_loaders.h"
#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      lattice::fuzz::write_file("tokenizer.json", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    const auto tokenizer = lattice::load_hf_tokenizer(path, "");
    tokenizer->decode(tokenizer->encode("Hello, world! <|endoftext|> It's 2024:\n\tcaf\xc3\xa9  ab abc </s>"));
  } catch (const lattice::InputError&) {
  }
  return 0;
}
