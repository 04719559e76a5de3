// 64-bit sample arithmetic: a sparse u8 dataset of 4.8e9 tokens (three documents of 1.6e9, the
// .idx lengths being i32) and S = 1, so sample counters, token offsets and byte offsets all pass
// 2^31 and 2^32. Only a few samples near the ends are read; the expected tokens are read straight
// from the file.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include "data/batch_loader.h"
#include "data/gpt_dataset.h"
#include "kernels/tensor.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::loader_options;
using lattice::testing::row;
using lattice::testing::TempDir;

namespace {

constexpr int64_t kDocLen = 1600000000;  // < 2^31 (i32 lengths)
constexpr int64_t kDocs = 3;
constexpr int64_t kTokens = kDocLen * kDocs;  // 4.8e9 > 2^32

template <typename T>
void put(std::ofstream& f, T v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Writes PREFIX.idx and a sparse PREFIX.bin with a byte pattern around the given positions.
bool write_sparse(const std::string& prefix, const std::vector<int64_t>& marks) {
  {
    std::ofstream idx(prefix + ".idx", std::ios::binary);
    idx.write("MMIDIDX\0\0", 9);
    put<uint64_t>(idx, 1);
    put<uint8_t>(idx, 1);  // u8
    put<uint64_t>(idx, kDocs);
    put<uint64_t>(idx, kDocs + 1);
    for (int64_t i = 0; i < kDocs; ++i) put<int32_t>(idx, static_cast<int32_t>(kDocLen));
    for (int64_t i = 0; i < kDocs; ++i) put<int64_t>(idx, i * kDocLen);
    for (int64_t i = 0; i <= kDocs; ++i) put<int64_t>(idx, i);
    if (!idx) return false;
  }
  FILE* bin = std::fopen((prefix + ".bin").c_str(), "wb");
  if (!bin) return false;
  bool ok = true;
  for (int64_t m : marks) {
    unsigned char buf[64];
    for (int j = 0; j < 64; ++j) buf[j] = static_cast<unsigned char>(1 + (m / 7 + j * 13) % 251);
    ok = ok && fseeko(bin, m, SEEK_SET) == 0 && std::fwrite(buf, 1, 64, bin) == 64;
  }
  ok = ok && fseeko(bin, kTokens - 1, SEEK_SET) == 0 && std::fputc(7, bin) != EOF;  // size = kTokens
  return std::fclose(bin) == 0 && ok;
}

// Token p of the file-order stream (one byte each, documents contiguous).
int32_t file_token(const std::string& prefix, int64_t p) {
  FILE* f = std::fopen((prefix + ".bin").c_str(), "rb");
  REQUIRE(f);
  REQUIRE(fseeko(f, p, SEEK_SET) == 0);
  int c = std::fgetc(f);
  std::fclose(f);
  REQUIRE(c != EOF);
  return c;
}

}  // namespace

TEST_CASE("over 2^31 tokens and samples: 64-bit sample index, offsets and loader state") {
  TempDir dir("large_sparse");
  const std::string prefix = dir / "huge";
  const int64_t two31 = int64_t{1} << 31;
  const std::vector<int64_t> marks = {two31 - 32, kDocLen - 32, 2 * kDocLen - 32, (int64_t{1} << 32) - 32,
                                      kTokens - 96};
  REQUIRE(write_sparse(prefix, marks));

  DataConfig cfg;
  cfg.path = prefix;
  cfg.split = "1";
  cfg.shuffle = false;
  const int64_t S = 1;
  auto samples = lattice::testing::gpt_samples(cfg, Split::kTrain, S);
  REQUIRE(samples->num_tokens() == kTokens);
  const int64_t n = kTokens - 1;  // floor((T - 1) / 1)
  REQUIRE(samples->num_samples() == n);
  REQUIRE(n > (int64_t{1} << 32));

  // Shuffle off: sample k is tokens [k, k + 2) — across 2^31, 2^32, document boundaries, the end.
  std::vector<int32_t> buf(2);
  for (int64_t m : marks) {
    for (int64_t k = m; k < m + 63 && k < n; ++k) {
      samples->read(k, buf.data());
      REQUIRE(buf[0] == file_token(prefix, k));
      REQUIRE(buf[1] == file_token(prefix, k + 1));
    }
  }
  samples->read(n - 1, buf.data());  // the last sample
  REQUIRE(buf[1] == 7);
  samples->read(n + two31 - 32, buf.data());  // epoch 1 wraps to the same sample
  REQUIRE(buf[0] == file_token(prefix, two31 - 32));
  const SampleLocation loc = samples->locate(2 * kDocLen + 5);
  REQUIRE(loc.document == 2);
  REQUIRE(loc.offset == 5);

  // The loader at a consumed-samples count past 2^32 (global batch 8, DP rank 1 of 2).
  const int64_t B = 8, mb = 2;
  const int64_t consumed = ((int64_t{1} << 32) - 32) / B * B;
  BatchLoader loader(samples, loader_options(mb, B, 1, 2, 2), consumed);
  REQUIRE(loader.consumed_samples() == consumed);
  Tensor in = Tensor::empty({mb, S}, DType::kI32), tg = Tensor::empty({mb, S}, DType::kI32);
  for (int64_t t = 0; t < 4; ++t) {
    loader.next(in, tg);
    const int64_t g = consumed / B + t / 2, m = t % 2;
    for (int64_t r = 0; r < mb; ++r) {
      const int64_t k = g * B + B / 2 + m * mb + r;  // rank 1's half of the batch
      REQUIRE(row(in, r)[0] == file_token(prefix, k));
      REQUIRE(row(tg, r)[0] == file_token(prefix, k + 1));
    }
  }
  REQUIRE(loader.consumed_samples() == consumed + 4 * mb * 2);

  // Shuffle on: documents and samples permuted over 4.8e9 samples; reading stays consistent with
  // the sample index (document, offset) and the file.
  cfg.shuffle = true;
  auto shuffled = lattice::testing::gpt_samples(cfg, Split::kTrain, S);
  for (int64_t k : {int64_t{0}, two31 + 3, n - 1, n + 12345, 3 * n + two31}) {
    const SampleLocation l = shuffled->locate(k);
    REQUIRE(l.sample >= 0);
    REQUIRE(l.sample < n);
    REQUIRE(l.epoch == k / n);
    shuffled->read(k, buf.data());
    REQUIRE(buf[0] == file_token(prefix, l.document * kDocLen + l.offset));
  }
}
