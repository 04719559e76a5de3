// BpeTokenizer: byte-level BPE behind the Tokenizer interface — GPT-2 vocab.json + merges.txt or a
// Hugging Face tokenizer.json (BPE model, ByteLevel / Split pre-tokenizers, added tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_model.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace lattice {

// A token matched in the raw text before pre-tokenization (Hugging Face's added_tokens).
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false;  // matched after normalization (a second pass; no normalizer here)
  bool lstrip = false;      // swallows whitespace on its left
  bool rstrip = false;      // swallows whitespace on its right
};

class BpeTokenizer final : public Tokenizer {
 public:
  // eod: the token ending each document; must be an added token or in the vocabulary.
  BpeTokenizer(std::string name, std::unique_ptr<BpeModel> model, PreTokenizer pre_tokenizer,
               std::vector<AddedToken> added, const std::string& eod_token);
  ~BpeTokenizer() override;
  std::string name() const override { return name_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_bytes_.size()); }
  int32_t eod_id() const override { return eod_id_; }
  // Throws InputError "invalid UTF-8 at byte offset N" for text that is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::optional<int32_t> token_to_id(const std::string& token) const;
  std::vector<int32_t> document_prefix() const override { return document_prefix_; }
  std::vector<int32_t> document_suffix() const override { return document_suffix_; }
  // The post_processor template's ids around a document (see Tokenizer::document_prefix).
  void set_document_template(std::vector<int32_t> prefix, std::vector<int32_t> suffix) {
    document_prefix_ = std::move(prefix);
    document_suffix_ = std::move(suffix);
  }

 private:
  struct Trie;
  struct ThreadCache;
  ThreadCache& cache() const;
  // Splits `text` on the added tokens of one pass: on_text(piece) / on_token(id), in order.
  template <class OnText, class OnToken>
  void split_added(const Trie& trie, std::string_view text, OnText&& on_text,
                   OnToken&& on_token) const;
  void encode_text(std::string_view text, ThreadCache& tc, std::vector<int32_t>& out) const;

  std::string name_;
  std::unique_ptr<BpeModel> model_;
  PreTokenizer pre_tokenizer_;
  std::vector<AddedToken> added_;
  std::unique_ptr<Trie> raw_trie_;         // added tokens with normalized = false
  std::unique_ptr<Trie> normalized_trie_;  // added tokens with normalized = true
  std::vector<std::string> id_bytes_;      // decoded bytes of each id
  std::vector<char> id_valid_;
  int32_t eod_id_ = -1;
  std::vector<int32_t> document_prefix_, document_suffix_;
  uint64_t instance_ = 0;
};

// Hard limit on the bytes of one piece kept in the per-thread cache.
inline constexpr size_t kBpeCacheMaxPieceBytes = 256;

}  // namespace lattice
