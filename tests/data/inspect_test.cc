// `lattice data inspect`: counts, dtype, length statistics and decoded first tokens.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "data/indexed_dataset_writer.h"
#include "data/inspect.h"
#include "data/tokenizer.h"
#include "data/tokenizer_record.h"
#include "kernels/error.h"
#include "tests/data/test_util.h"

using namespace lattice;

namespace {

// A dataset of one document: `text`'s bytes as byte-tokenizer ids, then the end-of-document id.
void write_byte_document(const std::string& prefix, const std::string& text) {
  IndexedDatasetWriter w(prefix, TokenDType::kU16);
  std::vector<int32_t> doc;
  for (char c : text) doc.push_back(static_cast<unsigned char>(c));
  doc.push_back(256);
  w.add_document(doc);
  w.finish();
}

}  // namespace
using lattice::testing::TempDir;

TEST_CASE("data inspect reports counts, dtype, length statistics and decoded documents") {
  TempDir dir("inspect");
  const std::string prefix = dir / "ds";
  {
    IndexedDatasetWriter w(prefix, TokenDType::kU16);
    // 100 documents of lengths 1..100 (+ EOD): min 2, mean 51.5, median 51 (nearest rank), p99 100, max 101.
    for (int d = 0; d < 100; ++d) {
      std::vector<int32_t> doc;
      const std::string text = d == 0 ? "Hello\nworld" : std::string(d + 1, 'a' + d % 26);
      for (int i = 0; i < d + 1; ++i) doc.push_back(static_cast<unsigned char>(text[i]));
      doc.push_back(256);
      w.add_document(doc);
    }
    w.finish();
  }
  InspectOptions o;
  o.prefix = prefix;
  o.show = 2;
  std::string report = inspect_dataset(o);
  INFO(report);
  CHECK_THAT(report, Catch::Contains("sequences: 100"));
  CHECK_THAT(report, Catch::Contains("documents: 100"));
  CHECK_THAT(report, Catch::Contains("tokens:    5150"));
  CHECK_THAT(report, Catch::Contains("dtype:     u16"));
  CHECK_THAT(report, Catch::Contains("min 2 | mean 51.5 | median 51 | p99 100 | max 101"));
  CHECK_THAT(report, Catch::Contains("sequence 0 (2 tokens): 72 256"));
  CHECK_THAT(report, Catch::Contains("sequence 1 (3 tokens): 98 98 256"));
  CHECK_THAT(report, !Catch::Contains("sequence 2 ("));
  CHECK_THAT(report, !Catch::Contains("decoded"));
  o.tokenizer.type = "byte";
  o.show = 1;
  o.tokens_per_doc = 3;
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"H<|endoftext|>\""));
  // Longer first document: escaped newline, cut after tokens_per_doc.
  const std::string prefix2 = dir / "ds2";
  write_byte_document(prefix2, "Hello\nworld");
  o.prefix = prefix2;
  o.tokens_per_doc = 7;
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("sequence 0 (12 tokens), first 7: 72 101 108 108 111 10 119 ..."));
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"Hello\\nw\""));
  CHECK_THAT(report, Catch::Contains("tokenizer: byte (--tokenizer)"));
  // No --tokenizer: the one recorded beside the dataset (as `data prepare` writes it) decodes.
  const ByteTokenizer byte;
  write_tokenizer_record(prefix2, TokenizerOptions{.type = "byte"}, byte, {});
  o.tokenizer.type = "";
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("tokenizer: byte (" + prefix2 + ".tokenizer.json)"));
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"Hello\\nw\""));
  // The dataset replaced under its record (another corpus written over PREFIX.bin/.idx): the record
  // no longer describes it, and says so rather than decode with a tokenizer that may not be its.
  write_byte_document(prefix2, "Another, longer corpus");
  CHECK_THROWS_WITH(inspect_dataset(o), Catch::Contains("tokenizer record '" + prefix2 + ".tokenizer.json'") &&
                                            Catch::Contains("they were replaced"));
  write_tokenizer_record(prefix2, TokenizerOptions{.type = "byte"}, byte, {});
  CHECK_THAT(inspect_dataset(o), Catch::Contains("tokenizer: byte (" + prefix2 + ".tokenizer.json)"));
  o.tokenizer.type = "nope";
  CHECK_THROWS_WITH(inspect_dataset(o), Catch::Contains("--tokenizer"));
  o.tokenizer.type = "";
  o.prefix = dir / "missing";
  CHECK_THROWS_AS(inspect_dataset(o), InputError);
}

TEST_CASE("data inspect prints valid UTF-8: a character cut by the token limit is escaped as \\xNN") {
  TempDir dir("inspect_utf8");
  const std::string prefix = dir / "ds";
  // "é" is 2 bytes, "€" 3, "😀" 4. Then bytes that are no UTF-8: a stray continuation byte, an
  // overlong "/" (c0 af), a surrogate (ed a0 80), a lead byte past U+10FFFF (f5), and a 3-byte lead
  // cut short by ASCII.
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\x80|\xc0\xaf|\xed\xa0\x80|\xf5|\xe2\x82z";
  write_byte_document(prefix, text);
  InspectOptions o;
  o.prefix = prefix;
  o.show = 1;
  o.tokenizer.type = "byte";
  // Whole characters are kept as they are; everything that is not UTF-8 is escaped byte by byte.
  o.tokens_per_doc = static_cast<int64_t>(text.size());
  std::string report = inspect_dataset(o);
  INFO(report);
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\x80|\\xc0\\xaf|"
                                     "\\xed\\xa0\\x80|\\xf5|\\xe2\\x82z\""));
  // The first 1 + 2 + 2 tokens end inside "€" (e2 82 of e2 82 ac), the first 1 + 2 + 3 + 3 inside
  // "😀": the cut bytes are escaped, the report stays valid UTF-8.
  o.tokens_per_doc = 5;
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"a\xc3\xa9\\xe2\\x82\""));
  o.tokens_per_doc = 9;
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"a\xc3\xa9\xe2\x82\xac\\xf0\\x9f\\x98\""));
  o.tokens_per_doc = 2;  // the lead byte of "é" alone
  report = inspect_dataset(o);
  CHECK_THAT(report, Catch::Contains("decoded (byte): \"a\\xc3\""));
}
