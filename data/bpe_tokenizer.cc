// BpeTokenizer: UTF-8 check, added-token splitting, pre-tokenization, cached BPE, decode.
#include "data/bpe_tokenizer.h"

#include <unordered_map>

#include <fmt/format.h>

#include "data/per_thread.h"
#include "data/utf8.h"
#include "kernels/error.h"

namespace lattice {

namespace {

// Rust's char::is_whitespace for the code point at s[i] (valid UTF-8); sets len.
bool is_whitespace_at(std::string_view s, size_t i, size_t& len) {
  auto c = static_cast<unsigned char>(s[i]);
  uint32_t cp;
  if (c < 0x80) {
    len = 1;
    return c == ' ' || (c >= 0x09 && c <= 0x0D);
  } else if (c < 0xE0) {
    len = 2;
    cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
  } else if (c < 0xF0) {
    len = 3;
    cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
  } else {
    len = 4;
    return false;
  }
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Start of the code point that ends just before s[end] (valid UTF-8).
size_t prev_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

// A byte trie over added tokens, for leftmost-longest matching.
struct BpeTokenizer::Trie {
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;
    int token = -1;  // index into added_
  };
  std::vector<Node> nodes{Node{}};
  std::array<bool, 256> first{};
  bool empty() const { return nodes[0].children.empty(); }
  void insert(std::string_view s, int token) {
    int n = 0;
    for (unsigned char c : s) {
      int child = -1;
      for (auto& [b, idx] : nodes[n].children) {
        if (b == c) child = idx;
      }
      if (child < 0) {
        child = static_cast<int>(nodes.size());
        nodes[n].children.emplace_back(c, child);
        nodes.emplace_back();
      }
      n = child;
    }
    nodes[n].token = token;
    first[static_cast<unsigned char>(s[0])] = true;
  }
  // Longest token starting at s[i]: its index and length, or -1.
  int longest(std::string_view s, size_t i, size_t& len) const {
    int n = 0, best = -1;
    for (size_t k = i; k < s.size(); ++k) {
      int child = -1;
      auto c = static_cast<unsigned char>(s[k]);
      for (auto& [b, idx] : nodes[n].children) {
        if (b == c) {
          child = idx;
          break;
        }
      }
      if (child < 0) break;
      n = child;
      if (nodes[n].token >= 0) best = nodes[n].token, len = k + 1 - i;
    }
    return best;
  }
};

struct BpeTokenizer::ThreadCache {
  std::unordered_map<std::string, uint64_t, ViewHash, std::equal_to<>> map;  // → offset << 32 | count
  std::vector<int32_t> ids;
  void clear() {
    map.clear();
    ids.clear();
  }
};

BpeTokenizer::BpeTokenizer(std::string name, std::unique_ptr<BpeModel> model,
                           PreTokenizer pre_tokenizer, std::vector<AddedToken> added,
                           const std::string& eod_token)
    : name_(std::move(name)),
      model_(std::move(model)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      added_(std::move(added)),
      raw_trie_(std::make_unique<Trie>()),
      normalized_trie_(std::make_unique<Trie>()),
      instance_(new_per_thread_owner_id()) {
  int32_t max_id = -1;
  for (const auto& [tok, id] : model_->vocab()) max_id = std::max(max_id, id);
  for (const auto& a : added_) max_id = std::max(max_id, a.id);
  // The id tables below have max_id + 1 entries: an id far above the token count (a damaged
  // file) would make them huge. Added tokens may repeat vocabulary entries, hence the sum.
  const size_t tokens = model_->vocab().size() + added_.size();
  if (static_cast<size_t>(max_id) >= tokens) {
    throw InputError(fmt::format("{} tokenizer: token id {} is not below the number of tokens ({}); the ids "
                                 "must number the tokens 0, 1, 2, ...",
                                 name_, max_id, tokens));
  }
  id_bytes_.assign(max_id + 1, std::string());
  id_valid_.assign(max_id + 1, 0);
  for (const auto& [tok, id] : model_->vocab()) {
    if (id < 0) continue;
    std::string bytes;
    if (!unicode_to_bytes(tok, bytes)) bytes = tok;  // not a byte-level string: keep it as is
    id_bytes_[id] = std::move(bytes);
    id_valid_[id] = 1;
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& a = added_[i];
    id_bytes_[a.id] = a.content;  // added tokens were matched in the raw text: decode to it
    id_valid_[a.id] = 1;
    if (a.content.empty()) continue;
    (a.normalized ? *normalized_trie_ : *raw_trie_).insert(a.content, static_cast<int>(i));
  }
  auto eod = token_to_id(eod_token);
  if (!eod) {
    throw InputError(fmt::format("{} tokenizer: end-of-document token {:?} is not in the vocabulary",
                                 name_, eod_token));
  }
  eod_id_ = *eod;
}

BpeTokenizer::~BpeTokenizer() = default;

std::optional<int32_t> BpeTokenizer::token_to_id(const std::string& token) const {
  for (const auto& a : added_) {
    if (a.content == token) return a.id;
  }
  if (auto id = model_->token_id(bytes_to_unicode_string(token))) return id;
  return model_->token_id(token);
}

BpeTokenizer::ThreadCache& BpeTokenizer::cache() const {
  return per_thread<ThreadCache>(instance_, [] { return std::make_unique<ThreadCache>(); });
}

template <class OnText, class OnToken>
void BpeTokenizer::split_added(const Trie& trie, std::string_view text, OnText&& on_text,
                               OnToken&& on_token) const {
  if (trie.empty()) {
    on_text(text);
    return;
  }
  size_t start_offset = 0, i = 0;
  while (i < text.size()) {
    if (!trie.first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    size_t len = 0;
    int t = trie.longest(text, i, len);
    if (t < 0) {
      ++i;
      continue;
    }
    const AddedToken& a = added_[t];
    size_t start = i, stop = i + len;
    if (a.lstrip) {
      while (start > start_offset) {
        size_t p = prev_char_start(text, start), l;
        if (!is_whitespace_at(text, p, l)) break;
        start = p;
      }
    }
    if (a.rstrip) {
      size_t l;
      while (stop < text.size() && is_whitespace_at(text, stop, l)) stop += l;
    }
    if (start > start_offset) on_text(text.substr(start_offset, start - start_offset));
    on_token(a.id);
    start_offset = i = stop;
  }
  if (start_offset < text.size()) on_text(text.substr(start_offset));
}

void BpeTokenizer::encode_text(std::string_view text, ThreadCache& tc,
                               std::vector<int32_t>& out) const {
  pre_tokenizer_.run(text, [&](std::string_view piece) {
    if (piece.size() > kBpeCacheMaxPieceBytes) {
      model_->encode_piece(piece, out);
      return;
    }
    auto it = tc.map.find(piece);
    if (it != tc.map.end()) {
      const int32_t* p = tc.ids.data() + (it->second >> 32);
      out.insert(out.end(), p, p + (it->second & 0xFFFFFFFFu));
      return;
    }
    size_t before = out.size();
    model_->encode_piece(piece, out);
    if (tc.map.size() >= (1u << 18) || tc.ids.size() >= (1u << 24)) tc.clear();
    uint64_t off = tc.ids.size(), count = out.size() - before;
    tc.ids.insert(tc.ids.end(), out.begin() + before, out.end());
    tc.map.emplace(std::string(piece), (off << 32) | count);
  });
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw InputError(fmt::format("invalid UTF-8 at byte offset {} (byte 0x{:02X}); the {} tokenizer "
                                 "needs UTF-8 text",
                                 bad, static_cast<unsigned char>(text[bad]), name_));
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  ThreadCache& tc = cache();
  auto push_id = [&](int32_t id) { out.push_back(id); };
  split_added(
      *raw_trie_, text,
      [&](std::string_view seg) {
        split_added(*normalized_trie_, seg, [&](std::string_view s) { encode_text(s, tc, out); },
                    push_id);
      },
      push_id);
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(id_bytes_.size()) || !id_valid_[id]) {
      throw Error(fmt::format("{} tokenizer: token id {} is not in the vocabulary (size {})", name_,
                              id, id_bytes_.size()));
    }
    out += id_bytes_[id];
  }
  return out;
}

}  // namespace lattice
