// Byte-level BPE: the byte ↔ unicode map, the pair-rank table and the merge loop.
#include "data/bpe_model.h"

#include <algorithm>
#include <climits>
#include <queue>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

namespace {

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cps{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  uint32_t n = 0;
  for (int b = 0; b < 256; ++b) cps[b] = printable[b] ? b : 256 + n++;
  return cps;
}

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

inline uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    auto cps = byte_code_points();
    for (int b = 0; b < 256; ++b) append_utf8(cps[b], t[b]);
    return t;
  }();
  return table;
}

bool unicode_to_bytes(std::string_view s, std::string& out) {
  static const std::unordered_map<uint32_t, unsigned char> back = [] {
    std::unordered_map<uint32_t, unsigned char> m;
    auto cps = byte_code_points();
    for (int b = 0; b < 256; ++b) m[cps[b]] = static_cast<unsigned char>(b);
    return m;
  }();
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c >> 5) == 6 && i + 1 < s.size()) {
      cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F), len = 2;
    } else {
      return false;  // byte-level characters are all below U+0800... and above: none are 3 bytes
    }
    auto it = back.find(cp);
    if (it == back.end()) return false;
    out.push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

std::string bytes_to_unicode_string(std::string_view bytes) {
  const auto& t = byte_to_unicode();
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) s += t[b];
  return s;
}

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   Options options, const std::string& where_merges)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const auto& t = byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(t[b]);
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    if (it == vocab_.end()) {
      throw InputError(fmt::format("unk_token {:?} is not in the vocabulary", *options_.unk_token));
    }
    unk_id_ = it->second;
  }
  size_t cap = 16;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  pairs_.assign(cap, PairEntry{kEmpty, 0, 0});
  pair_mask_ = cap - 1;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    auto ia = vocab_.find(a);
    auto ib = vocab_.find(b);
    auto inew = vocab_.find(a + b);
    const char* missing = ia == vocab_.end() ? "first" : ib == vocab_.end() ? "second" : nullptr;
    if (missing) {
      throw InputError(fmt::format("{}[{}]: merge {:?} {:?}: the {} token is not in the vocabulary",
                                   where_merges, i, a, b, missing));
    }
    if (inew == vocab_.end()) {
      throw InputError(fmt::format("{}[{}]: merge {:?} {:?}: the merged token {:?} is not in the vocabulary",
                                   where_merges, i, a, b, a + b));
    }
    insert_pair(ia->second, ib->second, static_cast<int32_t>(i), inew->second);
  }
}

std::optional<int32_t> BpeModel::token_id(const std::string& token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::insert_pair(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
  uint64_t key = pair_key(a, b);
  for (uint64_t h = mix(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
    if (pairs_[h].key == kEmpty || pairs_[h].key == key) {  // a later duplicate wins, as in HF
      pairs_[h] = PairEntry{key, rank, new_id};
      return;
    }
  }
}

inline bool BpeModel::find_pair(int32_t a, int32_t b, int32_t& rank, int32_t& new_id) const {
  uint64_t key = pair_key(a, b);
  for (uint64_t h = mix(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
    const PairEntry& e = pairs_[h];
    if (e.key == key) {
      rank = e.rank;
      new_id = e.new_id;
      return true;
    }
    if (e.key == kEmpty) return false;
  }
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    auto it = vocab_.find(bytes_to_unicode_string(bytes));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> syms;
  syms.clear();
  bool last_unk = false;
  for (unsigned char c : bytes) {
    int32_t id = byte_id_[c];
    if (id >= 0) {
      syms.push_back(id);
      last_unk = false;
    } else if (unk_id_) {  // as HF: unknown characters become unk (fused if fuse_unk), else vanish
      if (!(options_.fuse_unk && last_unk)) syms.push_back(*unk_id_);
      last_unk = true;
    }
  }
  if (syms.size() > 1) {
    if (syms.size() <= 64) {
      merge_short(syms);
    } else {
      merge_long(syms);
    }
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

// Lowest rank first, leftmost among equal ranks: a scan over the pair ranks, updated locally.
void BpeModel::merge_short(std::vector<int32_t>& syms) const {
  int32_t ranks[64], news[64];
  size_t n = syms.size();
  auto rank_at = [&](size_t i) {
    if (!find_pair(syms[i], syms[i + 1], ranks[i], news[i])) ranks[i] = INT32_MAX;
  };
  for (size_t i = 0; i + 1 < n; ++i) rank_at(i);
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = ranks[0];
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) best_rank = ranks[i], best = i;
    }
    if (best_rank == INT32_MAX) break;
    syms[best] = news[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      syms[i] = syms[i + 1];
      ranks[i] = ranks[i + 1];
      news[i] = news[i + 1];
    }
    --n;
    if (best + 1 < n) rank_at(best);
    if (best > 0) rank_at(best - 1);
  }
  syms.resize(n);
}

// Hugging Face's Word::merge_all: a heap of (rank, position) over a linked list of symbols.
void BpeModel::merge_long(std::vector<int32_t>& syms) const {
  const int n = static_cast<int>(syms.size());
  std::vector<int> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Item {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Item& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  auto push = [&](int i) {
    int j = next[i];
    int32_t r, id;
    if (j >= 0 && find_pair(syms[i], syms[j], r, id)) heap.push(Item{r, i, id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Item top = heap.top();
    heap.pop();
    int i = top.pos;
    if (!alive[i] || next[i] < 0) continue;
    int j = next[i];
    int32_t r, id;
    if (!find_pair(syms[i], syms[j], r, id) || id != top.new_id) continue;
    syms[i] = id;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    push(i);
  }
  size_t k = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) syms[k++] = syms[i];
  syms.resize(k);
}

}  // namespace lattice
