// PreTokenizer: cuts text into the pieces BPE merges within, as Hugging Face's pre-tokenizers do
// (ByteLevel with the GPT-2 regex, Split with a regex and a delimiter behavior, Sequence of those).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lattice {

// A compiled PCRE2 pattern (UTF + UCP, JIT when available). Matching is const and thread-safe:
// each thread gets its own match data.
class Regex {
 public:
  // Throws InputError naming `where` if the pattern does not compile.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Calls on_match(start, end) for each non-overlapping match in s (valid UTF-8), left to right;
  // after an empty match the search resumes one character later (as Oniguruma's find_iter).
  void for_each_match(std::string_view s, const std::function<void(size_t, size_t)>& on_match) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct ThreadData;
  ThreadData& thread_data() const;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code*
  bool jit_ = false;
  uint64_t instance_ = 0;
};

// How a Split treats the matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The GPT-2 pre-tokenization pattern (Hugging Face's ByteLevel with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // Split(pattern, behavior, invert).
  void add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert);
  // ByteLevel(add_prefix_space, use_regex): optional prefix space, then (use_regex) a Split with
  // the GPT-2 pattern, Isolated. The byte → unicode mapping itself is the model's business.
  void add_byte_level(bool add_prefix_space, bool use_regex);
  // Calls emit(piece) for each non-empty piece of text, in order.
  void run(std::string_view text, const std::function<void(std::string_view)>& emit) const;
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no splitting
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void apply(size_t step, std::string_view piece, const std::function<void(std::string_view)>& emit) const;
  std::vector<Step> steps_;
};

}  // namespace lattice
