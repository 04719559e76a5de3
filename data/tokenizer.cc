// Tokenizer factory and the byte-level tokenizer.
#include "data/tokenizer.h"

#include <fmt/format.h>

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

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& flag) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  throw InputError(fmt::format("{} {}: unknown tokenizer; known tokenizers: byte", flag, name));
}

}  // namespace lattice
