// Tokenizer factory and the byte-level tokenizer.
#include "data/tokenizer.h"

#include <fmt/format.h>

#include "data/bpe_loaders.h"
#include "kernels/error.h"

namespace lattice {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else if (id == kEod) {
      out += "<|endoftext|>";
    } else {
      throw Error(fmt::format("byte tokenizer: token id {} outside the vocabulary [0, 257)", id));
    }
  }
  return out;
}

void check_tokenizer_flags_have_type(const TokenizerOptions& o) {
  if (!o.type.empty()) return;
  const std::pair<const std::string*, const char*> flags[] = {{&o.tokenizer_file, "--tokenizer-file"},
                                                             {&o.vocab_file, "--vocab-file"},
                                                             {&o.merges_file, "--merges-file"},
                                                             {&o.eod_token, "--eod-token"}};
  for (const auto& [value, flag] : flags)
    if (!value->empty())
      throw InputError(fmt::format("{} {} is given without --tokenizer, which would ignore it (the data's recorded "
                                   "tokenizer is used then): add --tokenizer {}",
                                   flag, *value, o.tokenizer_file.empty() ? "gpt2-bpe (or hf)" : "hf"));
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& o, const TokenizerFileTexts* texts) {
  auto require = [&](const std::string& value, const char* flag) {
    if (value.empty()) throw InputError(fmt::format("--tokenizer {} needs {}", o.type, flag));
  };
  auto forbid = [&](const std::string& value, const char* flag) {
    if (!value.empty()) {
      throw InputError(fmt::format("{} {}: not used by --tokenizer {}", flag, value, o.type));
    }
  };
  if (o.type == "byte") {
    forbid(o.vocab_file, "--vocab-file");
    forbid(o.merges_file, "--merges-file");
    forbid(o.tokenizer_file, "--tokenizer-file");
    forbid(o.eod_token, "--eod-token");
    return std::make_unique<ByteTokenizer>();
  }
  if (o.type == "gpt2-bpe") {
    require(o.vocab_file, "--vocab-file (GPT-2 vocab.json)");
    require(o.merges_file, "--merges-file (GPT-2 merges.txt)");
    forbid(o.tokenizer_file, "--tokenizer-file");
    return load_gpt2_bpe(o.vocab_file, o.merges_file, o.eod_token, texts);
  }
  if (o.type == "hf") {
    require(o.tokenizer_file, "--tokenizer-file (a Hugging Face tokenizer.json)");
    forbid(o.vocab_file, "--vocab-file");
    forbid(o.merges_file, "--merges-file");
    return load_hf_tokenizer(o.tokenizer_file, o.eod_token, texts);
  }
  throw InputError(fmt::format("--tokenizer {}: unknown tokenizer; known tokenizers: byte, gpt2-bpe, hf",
                               o.type));
}

}  // namespace lattice
