// The reader against files written by the independent Python writer: dtypes, 64-bit offsets,
// and malformed inputs, each of which must fail with an InputError naming the file.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

#include "data/indexed_dataset.h"
#include "kernels/error.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::run_writer;
using lattice::testing::TempDir;
using lattice::testing::write_text;

namespace {

// Same formula as write_indexed_dataset.py.
int64_t gen_length(int64_t d, int64_t seed, int64_t max_len) { return 1 + (d * 37 + seed) % max_len; }
int64_t gen_token(int64_t d, int64_t j, int64_t seed, int64_t modulus) {
  return (d * 1000003 + j * 7919 + seed) % modulus;
}

}  // namespace

TEST_CASE("reader reads every integer dtype written by the Python writer") {
  TempDir dir("dtypes");
  struct Case { const char* name; TokenDType dtype; int64_t modulus; };
  const Case cases[] = {{"u8", TokenDType::kU8, 256},       {"i8", TokenDType::kI8, 128},
                        {"i16", TokenDType::kI16, 32768},   {"u16", TokenDType::kU16, 65536},
                        {"i32", TokenDType::kI32, 2147483647}, {"i64", TokenDType::kI64, 2147483647}};
  const int64_t docs = 23, seed = 5, max_len = 40;
  for (const Case& c : cases) {
    SECTION(c.name) {
      std::string prefix = dir / c.name;
      run_writer(fmt::format("--prefix {} --dtype {} --docs {} --seed {} --max-len {}", prefix, c.name,
                             docs, seed, max_len));
      IndexedDataset ds(prefix);
      REQUIRE(ds.dtype() == c.dtype);
      REQUIRE(ds.num_sequences() == docs);
      REQUIRE(ds.num_document_index_entries() == docs + 1);
      int64_t total = 0;
      for (int64_t d = 0; d < docs; ++d) {
        int64_t len = gen_length(d, seed, max_len);
        REQUIRE(ds.sequence_length(d) == len);
        std::vector<int32_t> got(len);
        ds.read(d, 0, len, got.data());
        for (int64_t j = 0; j < len; ++j) REQUIRE(got[j] == gen_token(d, j, seed, c.modulus));
        // A sub-range read starts at the right token.
        if (len > 3) {
          int32_t two[2];
          ds.read(d, 2, 2, two);
          REQUIRE(two[0] == gen_token(d, 2, seed, c.modulus));
          REQUIRE(two[1] == gen_token(d, 3, seed, c.modulus));
        }
        total += len;
      }
      REQUIRE(ds.total_tokens() == total);
      std::vector<int32_t> over(64);
      REQUIRE_THROWS_AS(ds.read(0, 0, gen_length(0, seed, max_len) + 1, over.data()), Error);
    }
  }
}

TEST_CASE("reader rejects float datasets and out-of-range token ids") {
  TempDir dir("float");
  SECTION("f32") {
    run_writer("--prefix " + (dir / "f") + " --dtype f32 --docs 3");
    REQUIRE_THROWS_AS(IndexedDataset(dir / "f"), InputError);
    REQUIRE_THROWS_WITH(IndexedDataset(dir / "f"),
                        Catch::Contains(dir / "f.idx") && Catch::Contains("floating-point"));
  }
  SECTION("i64 token above INT32_MAX") {
    write_text(dir / "t.json", "[[1, 2, 3], [4, 2147483648, 6]]");
    run_writer("--prefix " + (dir / "big") + " --dtype i64 --tokens " + (dir / "t.json"));
    IndexedDataset ds(dir / "big");
    int32_t out[3];
    ds.read(0, 0, 3, out);
    REQUIRE(out[2] == 3);
    REQUIRE_THROWS_AS(ds.read(1, 0, 3, out), InputError);
    REQUIRE_THROWS_WITH(ds.read(1, 0, 3, out), Catch::Contains(dir / "big.bin") &&
                                                   Catch::Contains("2147483648") &&
                                                   Catch::Contains("token 1 of sequence 1"));
  }
  SECTION("negative i8 token") {
    write_text(dir / "t.json", "[[1, -5]]");
    run_writer("--prefix " + (dir / "neg") + " --dtype i8 --tokens " + (dir / "t.json"));
    IndexedDataset ds(dir / "neg");
    int32_t out[2];
    REQUIRE_THROWS_WITH(ds.read(0, 0, 2, out), Catch::Contains(dir / "neg.bin") && Catch::Contains("-5"));
  }
}

TEST_CASE("64-bit offsets: the last document of a sparse .bin over 4 GiB") {
  TempDir dir("sparse");
  std::string prefix = dir / "huge";
  const int64_t gap = (int64_t{1} << 32) + 12345;  // pushes the last pointer past 2^32
  run_writer(fmt::format("--prefix {} --dtype u16 --docs 4 --seed 9 --max-len 30 --gap {}", prefix, gap));
  IndexedDataset ds(prefix);
  REQUIRE(ds.bin_bytes() > (uint64_t{1} << 32));
  REQUIRE(ds.num_sequences() == 4);
  REQUIRE(ds.sequence_pointer(3) > (int64_t{1} << 32));
  int64_t len = gen_length(3, 9, 30);
  REQUIRE(ds.sequence_length(3) == len);
  std::vector<int32_t> got(len);
  ds.read(3, 0, len, got.data());
  for (int64_t j = 0; j < len; ++j) REQUIRE(got[j] == gen_token(3, j, 9, 65536));
  std::vector<int32_t> first(gen_length(0, 9, 30));
  ds.read(0, 0, first.size(), first.data());
  REQUIRE(first[0] == gen_token(0, 0, 9, 65536));
  // TempDir removes the sparse file.
}

TEST_CASE("malformed datasets fail with InputError naming the file") {
  TempDir dir("malformed");
  struct Case { const char* corrupt; const char* file; const char* words; };
  const Case cases[] = {
      {"magic", ".idx", "bad magic"},
      {"version", ".idx", "version 2"},
      {"truncate", ".idx", "truncated"},
      {"trailing", ".idx", "trailing bytes"},
      {"pointer", ".bin", "spans bytes"},
      {"docidx", ".idx", "must end at the sequence count"},
      {"nobin", ".bin", "cannot open"},
      {"negative-length", ".idx", "negative length"},
  };
  for (const Case& c : cases) {
    SECTION(c.corrupt) {
      std::string prefix = dir / c.corrupt;
      run_writer(fmt::format("--prefix {} --dtype u16 --docs 5 --corrupt {}", prefix, c.corrupt));
      REQUIRE_THROWS_AS(IndexedDataset(prefix), InputError);
      REQUIRE_THROWS_WITH(IndexedDataset(prefix),
                          Catch::Contains(prefix + c.file) && Catch::Contains(c.words) &&
                              Catch::Contains("lattice data prepare"));
    }
  }
  SECTION("missing dataset") {
    REQUIRE_THROWS_WITH(IndexedDataset(dir / "nothing"),
                        Catch::Contains(dir / "nothing.idx") && Catch::Contains("data.path"));
  }
  SECTION("empty idx") {
    write_text(dir / "empty.idx", "");
    write_text(dir / "empty.bin", "");
    REQUIRE_THROWS_WITH(IndexedDataset(dir / "empty"),
                        Catch::Contains(dir / "empty.idx") && Catch::Contains("truncated"));
  }
  SECTION("header claims absurd counts") {
    std::string idx(kIndexMagic, 9);
    auto put64 = [&](uint64_t v) { idx.append(reinterpret_cast<const char*>(&v), 8); };
    put64(1);
    idx.push_back(8);
    put64(std::numeric_limits<uint64_t>::max() / 4);
    put64(1);
    write_text(dir / "absurd.idx", idx);
    write_text(dir / "absurd.bin", "");
    REQUIRE_THROWS_WITH(IndexedDataset(dir / "absurd"),
                        Catch::Contains(dir / "absurd.idx") && Catch::Contains("truncated"));
  }
}
