// BpeModel: byte-level BPE — a vocabulary of byte-level strings, merges ranked by their order,
// and the merge loop that turns one pre-tokenized piece (raw bytes) into token ids.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lattice {

// GPT-2's reversible map from bytes to printable unicode characters (as UTF-8 strings), and back.
const std::array<std::string, 256>& byte_to_unicode();
// Appends the bytes that a byte-level string stands for; false if it has a character outside the map.
bool unicode_to_bytes(std::string_view s, std::string& out);
// The byte-level string of raw bytes (each byte → its character).
std::string bytes_to_unicode_string(std::string_view bytes);

class BpeModel {
 public:
  struct Options {
    std::optional<std::string> unk_token;
    bool fuse_unk = false;
    bool ignore_merges = false;
  };
  // vocab: byte-level token string → id. merges: pairs in rank order. Throws InputError with
  // `where` + the index of the merge if a merge names a token (or a concatenation) not in vocab.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options,
           const std::string& where_merges);

  // Appends the ids of one piece of raw bytes (uncached; callers cache).
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  std::optional<int32_t> token_id(const std::string& token) const;

 private:
  struct PairEntry {
    uint64_t key;
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  // rank and new id of the pair (a, b), or false.
  inline bool find_pair(int32_t a, int32_t b, int32_t& rank, int32_t& new_id) const;
  void insert_pair(int32_t a, int32_t b, int32_t rank, int32_t new_id);
  void merge_short(std::vector<int32_t>& syms) const;
  void merge_long(std::vector<int32_t>& syms) const;

  std::unordered_map<std::string, int32_t> vocab_;
  Options options_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_id_{};  // id of each byte's one-character token, -1 if none
  std::vector<PairEntry> pairs_;        // open addressing, power-of-two size
  uint64_t pair_mask_ = 0;
};

}  // namespace lattice
