// The report of `lattice data inspect`.
#include "data/inspect.h"

#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "data/indexed_dataset.h"
#include "data/tokenizer.h"
#include "data/tokenizer_record.h"
#include "kernels/error.h"

namespace lattice {

namespace {

// The length of the well-formed UTF-8 sequence of 2 to 4 bytes that starts at s[i] (Unicode's
// table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or 0 when s[i] does not
// start one: a stray continuation byte, an invalid lead byte, or a sequence cut short (as decoding
// the first tokens of a document cuts a character whose bytes are split across tokens).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

// One line of valid UTF-8: control bytes, newlines, quotes and backslashes escaped; well-formed
// multi-byte characters kept as they are; every byte of an incomplete or invalid sequence as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += fmt::format("\\x{:02x}", c);
        i += 1;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out.push_back(static_cast<char>(c));
    i += 1;
  }
  return out;
}

}  // namespace

std::string inspect_dataset(const InspectOptions& o) {
  if (o.show < 0) throw InputError(fmt::format("--show must be >= 0, got {}", o.show));
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_source;
  check_tokenizer_flags_have_type(o.tokenizer);
  if (!o.tokenizer.type.empty()) {
    tokenizer = make_tokenizer(o.tokenizer);
    tokenizer_source = "--tokenizer";
  } else if (const std::optional<TokenizerRecord> record = read_tokenizer_record(o.prefix)) {
    // The tokenizer `data prepare` recorded beside the dataset, as generate and the export use it.
    tokenizer = make_recorded_tokenizer(*record);
    tokenizer_source = record->path;
  }
  const IndexedDataset ds(o.prefix);
  const int64_t n = ds.num_sequences();
  std::string out;
  out += fmt::format("dataset:   {}\n", ds.prefix());
  out += fmt::format("files:     {} ({} bytes), {}\n", ds.bin_path(), ds.bin_bytes(), ds.idx_path());
  out += fmt::format("dtype:     {} ({} bytes/token)\n", token_dtype_name(ds.dtype()), token_dtype_size(ds.dtype()));
  out += fmt::format("sequences: {}\n", n);
  out += fmt::format("documents: {} (document-index entries: {}; training reads each sequence as a document)\n",
                     std::max<int64_t>(0, ds.num_document_index_entries() - 1), ds.num_document_index_entries());
  out += fmt::format("tokens:    {}\n", ds.total_tokens());
  if (tokenizer) out += fmt::format("tokenizer: {} ({})\n", tokenizer->name(), tokenizer_source);
  if (n > 0) {
    std::vector<int32_t> lengths(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) lengths[i] = static_cast<int32_t>(ds.sequence_length(i));
    const double mean = static_cast<double>(ds.total_tokens()) / static_cast<double>(n);
    auto nth = [&](double q) {  // nearest-rank quantile
      int64_t r = static_cast<int64_t>(q * static_cast<double>(n) + 0.999999999) - 1;
      r = std::clamp<int64_t>(r, 0, n - 1);
      std::nth_element(lengths.begin(), lengths.begin() + r, lengths.end());
      return lengths[r];
    };
    const int32_t median = nth(0.5), p99 = nth(0.99);
    const auto [mn, mx] = std::minmax_element(lengths.begin(), lengths.end());
    out += fmt::format("sequence length (tokens): min {} | mean {:.1f} | median {} | p99 {} | max {}\n", *mn, mean,
                       median, p99, *mx);
  }
  const int64_t show = std::min(o.show, n);
  for (int64_t i = 0; i < show; ++i) {
    const int64_t len = ds.sequence_length(i);
    const int64_t take = std::min(len, o.tokens_per_doc);
    std::vector<int32_t> ids(static_cast<size_t>(take));
    ds.read(i, 0, take, ids.data());
    std::string id_text;
    for (int64_t j = 0; j < take; ++j) id_text += (j ? " " : "") + std::to_string(ids[j]);
    out += fmt::format("sequence {} ({} tokens){}: {}{}\n", i, len, take < len ? fmt::format(", first {}", take) : "",
                       id_text, take < len ? " ..." : "");
    if (tokenizer) {
      std::string text;
      try {
        text = "\"" + printable(tokenizer->decode(ids)) + "\"";
      } catch (const Error& e) {
        text = fmt::format("(cannot decode with the {} tokenizer: {})", tokenizer->name(), e.what());
      }
      out += fmt::format("  decoded ({}): {}\n", tokenizer->name(), text);
    }
  }
  return out;
}

}  // namespace lattice
