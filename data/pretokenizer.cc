// PCRE2-backed regex splitting and the Hugging Face pre-tokenizer pipeline.
#include "data/pretokenizer.h"

#include <pcre2.h>

#include <fmt/format.h>

#include "data/per_thread.h"
#include "kernels/error.h"

namespace lattice {

namespace {

// Length of the UTF-8 sequence that starts with byte c (input is validated before matching).
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

}  // namespace

struct Regex::ThreadData {
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~ThreadData() {
    if (match) pcre2_match_data_free(match);
    if (context) pcre2_match_context_free(context);
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
  }
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& where)
    : pattern_(pattern), instance_(new_per_thread_owner_id()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  if (literal) options |= PCRE2_LITERAL;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw InputError(fmt::format("{}: regex {:?} does not compile at offset {}: {}", where, pattern,
                                 offset, reinterpret_cast<const char*>(message)));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Regex::ThreadData& Regex::thread_data() const {
  return per_thread<ThreadData>(instance_, [this] {
    auto td = std::make_unique<ThreadData>();
    td->match = pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(code_), nullptr);
    td->context = pcre2_match_context_create(nullptr);
    if (jit_) {
      td->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
      pcre2_jit_stack_assign(td->context, nullptr, td->jit_stack);
    }
    if (!td->match || !td->context) throw Error("regex: out of memory for match data");
    return td;
  });
}

void Regex::for_each_match(std::string_view s,
                           const std::function<void(size_t, size_t)>& on_match) const {
  ThreadData& td = thread_data();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(td.match);
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = jit_ ? pcre2_jit_match(code, subject, s.size(), pos, 0, td.match, td.context)
                  : pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, td.match,
                                td.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw Error(fmt::format("regex {:?}: matching failed: {}", pattern_,
                              reinterpret_cast<const char*>(message)));
    }
    size_t start = ov[0], end = ov[1];
    on_match(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= s.size()) return;
      pos = end + utf8_len(static_cast<unsigned char>(s[end]));
    }
  }
}

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior,
                             bool invert) {
  steps_.push_back(Step{std::move(regex), behavior, invert, false});
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const auto gpt2 = std::make_shared<const Regex>(kGpt2Pattern, false, "GPT-2 pattern");
  steps_.push_back(Step{use_regex ? gpt2 : nullptr, SplitBehavior::kIsolated, false, add_prefix_space});
}

void PreTokenizer::run(std::string_view text,
                       const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  apply(0, text, emit);
}

void PreTokenizer::apply(size_t step, std::string_view piece,
                         const std::function<void(std::string_view)>& emit) const {
  if (step == steps_.size()) {
    emit(piece);
    return;
  }
  const Step& st = steps_[step];
  std::string prefixed;
  if (st.add_prefix_space && piece.front() != ' ') {
    prefixed.reserve(piece.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(piece);
    piece = prefixed;
  }
  if (!st.regex) {
    apply(step + 1, piece, emit);
    return;
  }
  auto next = [&](size_t a, size_t b) {
    if (b > a) apply(step + 1, piece.substr(a, b - a), emit);
  };
  // Fast path: Isolated / Removed stream the pieces in order.
  if (st.behavior == SplitBehavior::kIsolated || st.behavior == SplitBehavior::kRemoved) {
    const bool keep_matches = st.behavior == SplitBehavior::kIsolated || st.invert;
    const bool keep_gaps = st.behavior == SplitBehavior::kIsolated || !st.invert;
    size_t prev = 0;
    st.regex->for_each_match(piece, [&](size_t a, size_t b) {
      if (a > prev && keep_gaps) next(prev, a);
      if (keep_matches) next(a, b);
      prev = b;
    });
    if (prev < piece.size() && keep_gaps) next(prev, piece.size());
    return;
  }
  // The other behaviors, as Hugging Face's NormalizedString::split folds (offsets, is_match).
  struct Span {
    size_t a, b;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  st.regex->for_each_match(piece, [&](size_t a, size_t b) {
    if (a > prev) spans.push_back({prev, a, st.invert});
    spans.push_back({a, b, !st.invert});
    prev = b;
  });
  if (prev < piece.size()) spans.push_back({prev, piece.size(), st.invert});
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (st.behavior) {
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !out.empty()) {
          out.back().second = s.b;
        } else {
          out.emplace_back(s.a, s.b);
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !out.empty()) {
          out.back().second = s.b;
        } else {
          out.emplace_back(s.a, s.b);
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().first = it->a;
        } else {
          out.emplace_back(it->a, it->b);
        }
        previous_match = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    default:
      break;
  }
  for (auto [a, b] : out) next(a, b);
}

}  // namespace lattice
