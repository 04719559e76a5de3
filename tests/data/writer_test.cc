// IndexedDatasetWriter: round trip through the reader, byte-identical output to the independent
// Python writer, and no complete-looking files after an interrupted write.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/indexed_dataset_writer.h"
#include "kernels/error.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::run_writer;
using lattice::testing::TempDir;
using lattice::testing::write_text;
namespace fs = std::filesystem;

namespace {

std::vector<std::vector<int32_t>> sample_docs(int32_t max_token) {
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 37; ++d) {
    std::vector<int32_t> doc;
    int len = d == 5 ? 0 : 1 + (d * 13) % 29;  // document 5 is empty
    // In 64 bits: max_token + 1 overflows int32 for the i32 dtype's largest token.
    for (int j = 0; j < len; ++j) {
      doc.push_back(static_cast<int32_t>((int64_t{d} * 7919 + int64_t{j} * 104729) % (int64_t{max_token} + 1)));
    }
    docs.push_back(doc);
  }
  docs[3][0] = max_token;
  return docs;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("writer round trip through the reader") {
  TempDir dir("writer_roundtrip");
  struct Case { const char* name; TokenDType dtype; int32_t max; };
  const Case cases[] = {{"u8", TokenDType::kU8, 255},
                        {"u16", TokenDType::kU16, 65535},
                        {"i32", TokenDType::kI32, 2147483647},
                        {"i64", TokenDType::kI64, 2147483647}};
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto docs = sample_docs(c.max);
      std::string prefix = dir / c.name;
      {
        IndexedDatasetWriter w(prefix, c.dtype);
        for (auto& d : docs) {
          // Stream in two pieces to exercise add_tokens + end_document.
          size_t half = d.size() / 2;
          w.add_tokens(std::span<const int32_t>(d.data(), half));
          w.add_tokens(std::span<const int32_t>(d.data() + half, d.size() - half));
          w.end_document();
        }
        w.finish();
      }
      REQUIRE_FALSE(fs::exists(prefix + ".bin.tmp"));
      REQUIRE_FALSE(fs::exists(prefix + ".idx.tmp"));
      IndexedDataset ds(prefix);
      REQUIRE(ds.dtype() == c.dtype);
      REQUIRE(ds.num_documents() == static_cast<int64_t>(docs.size()));
      for (size_t d = 0; d < docs.size(); ++d) {
        REQUIRE(ds.sequence_length(d) == static_cast<int64_t>(docs[d].size()));
        std::vector<int32_t> got(docs[d].size());
        ds.read(d, 0, got.size(), got.data());
        REQUIRE(got == docs[d]);
      }
    }
  }
}

TEST_CASE("writer output is byte-identical to the independent Python writer") {
  TempDir dir("writer_bytes");
  auto docs = sample_docs(65535);
  std::string json = "[";
  for (size_t d = 0; d < docs.size(); ++d) {
    json += d ? ",[" : "[";
    for (size_t j = 0; j < docs[d].size(); ++j) json += (j ? "," : "") + std::to_string(docs[d][j]);
    json += "]";
  }
  json += "]";
  write_text(dir / "docs.json", json);
  run_writer("--prefix " + (dir / "py") + " --dtype u16 --tokens " + (dir / "docs.json"));
  IndexedDatasetWriter w(dir / "cc", TokenDType::kU16);
  for (auto& d : docs) w.add_document(d);
  w.finish();
  REQUIRE(slurp(dir / "cc.idx") == slurp(dir / "py.idx"));
  REQUIRE(slurp(dir / "cc.bin") == slurp(dir / "py.bin"));
}

TEST_CASE("an interrupted writer leaves no files that look complete") {
  TempDir dir("writer_interrupted");
  std::string prefix = dir / "ds";
  std::vector<int32_t> tokens = {1, 2, 3};
  SECTION("exception before finish removes the temporaries") {
    try {
      IndexedDatasetWriter w(prefix, TokenDType::kU16);
      w.add_document(tokens);
      REQUIRE(fs::exists(prefix + ".bin.tmp"));
      REQUIRE(fs::exists(prefix + ".idx.tmp"));
      REQUIRE_FALSE(fs::exists(prefix + ".bin"));
      REQUIRE_FALSE(fs::exists(prefix + ".idx"));
      throw std::runtime_error("interrupted");
    } catch (const std::runtime_error&) {
    }
    REQUIRE(fs::is_empty(dir.path()));
  }
  SECTION("an aborted rewrite keeps the previous dataset intact") {
    {
      IndexedDatasetWriter w(prefix, TokenDType::kU16);
      w.add_document(tokens);
      w.finish();
    }
    {
      IndexedDatasetWriter w(prefix, TokenDType::kU16);
      w.add_document(std::vector<int32_t>{9, 9, 9, 9, 9});
    }  // destroyed without finish
    IndexedDataset ds(prefix);
    REQUIRE(ds.num_documents() == 1);
    REQUIRE(ds.sequence_length(0) == 3);
    REQUIRE_FALSE(fs::exists(prefix + ".bin.tmp"));
  }
  SECTION("a finished rewrite replaces the previous dataset") {
    for (int32_t len : {3, 5}) {
      IndexedDatasetWriter w(prefix, TokenDType::kU16);
      w.add_document(std::vector<int32_t>(len, 7));
      w.finish();
    }
    IndexedDataset ds(prefix);
    REQUIRE(ds.sequence_length(0) == 5);
  }
  SECTION("a token that does not fit the dtype is an error") {
    IndexedDatasetWriter w(prefix, TokenDType::kU8);
    REQUIRE_THROWS_AS(w.add_document(std::vector<int32_t>{1, 256}), Error);
  }
}

TEST_CASE("token dtype follows the vocabulary size") {
  REQUIRE(token_dtype_for_vocab(257) == TokenDType::kU16);
  REQUIRE(token_dtype_for_vocab(50257) == TokenDType::kU16);
  REQUIRE(token_dtype_for_vocab(65500) == TokenDType::kI32);
  REQUIRE(token_dtype_for_vocab(128256) == TokenDType::kI32);
}
