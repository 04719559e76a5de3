// Tokenizer: the interface `lattice data prepare` and sampling use; ByteTokenizer is the built-in
// one (256 byte tokens + end-of-document 256); byte-level BPE (data/bpe_tokenizer.h) plugs in too.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lattice {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod_id() const = 0;
  // Tokens of text; never includes eod_id (the caller appends it after each document).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The ids that go before and after every document's tokens (then eod_id): a Hugging Face
  // tokenizer's post_processor template, Llama 3's <|begin_of_text|>; none for most.
  virtual std::vector<int32_t> document_prefix() const { return {}; }
  virtual std::vector<int32_t> document_suffix() const { return {}; }
  // Text of ids. Throws Error for an id outside [0, vocab_size).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // True if encode(a + b) == encode(a) + encode(b) for any split point, so a document may be
  // encoded in pieces (lines) with bounded memory.
  virtual bool splits_anywhere() const { return false; }
};

// Each byte is its own token (0..255); 256 is end-of-document; vocab 257.
// decode renders the end-of-document token as "<|endoftext|>".
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return 257; }
  int32_t eod_id() const override { return kEod; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  bool splits_anywhere() const override { return true; }
};

// What make_tokenizer builds; one field per CLI flag of `lattice data prepare`.
struct TokenizerOptions {
  std::string type = "byte";  // --tokenizer byte|gpt2-bpe|hf
  std::string vocab_file;     // --vocab-file   (gpt2-bpe: GPT-2 vocab.json)
  std::string merges_file;    // --merges-file  (gpt2-bpe: GPT-2 merges.txt)
  std::string tokenizer_file; // --tokenizer-file (hf: a Hugging Face tokenizer.json, BPE model)
  // --eod-token: the end-of-document token. Empty: gpt2-bpe "<|endoftext|>"; hf the first of
  // "<|endoftext|>", "</s>", "<|end_of_text|>" that is a token. Not allowed with byte.
  std::string eod_token;
};

// Tokenizer files already read, by path (data prepare reads them once and copies those bytes into
// the dataset's record, so the tokenizer and its record cannot differ).
using TokenizerFileTexts = std::map<std::string, std::string>;

// byte → ByteTokenizer; gpt2-bpe / hf → BpeTokenizer. Bad options (unknown type, a missing or
// extra file flag, an unreadable/unsupported/malformed file) throw InputError naming the flag/file.
// A file found in `texts` is not read again. The tokenizers are thread-safe: several threads may
// encode with one tokenizer at once.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options, const TokenizerFileTexts* texts = nullptr);

// For the commands whose tokenizer defaults to the one recorded with the data (data inspect,
// generate): with no --tokenizer type, a file flag or --eod-token would be ignored. An InputError
// naming it and the --tokenizer it needs.
void check_tokenizer_flags_have_type(const TokenizerOptions& options);

}  // namespace lattice
