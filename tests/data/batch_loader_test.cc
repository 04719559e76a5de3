// The sample contract: data.split ranges, samples of S+1 tokens overlapping by one, global batch
// g micro-batch m, epochs, seeded shuffling, and the loader's errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "data/batch_loader.h"
#include "data/epoch_permutation.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset_writer.h"
#include "kernels/error.h"
#include "kernels/tensor.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::TempDir;

namespace {

// Documents with varied lengths (some empty, some longer than a sample); token = f(doc, pos).
std::vector<std::vector<int32_t>> make_docs(int n) {
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < n; ++d) {
    int len = (d % 11 == 4) ? 0 : 1 + (d * 29 + 7) % 23;
    std::vector<int32_t> doc;
    for (int j = 0; j < len; ++j) doc.push_back((d * 31 + j * 7) % 1000);
    doc.push_back(1000);  // "EOD"
    docs.push_back(doc);
  }
  return docs;
}

std::string write_docs(const TempDir& dir, const std::vector<std::vector<int32_t>>& docs) {
  std::string prefix = dir / "ds";
  IndexedDatasetWriter w(prefix, TokenDType::kU16);
  for (auto& d : docs) w.add_document(d);
  w.finish();
  return prefix;
}

std::vector<int32_t> stream_of(const std::vector<std::vector<int32_t>>& docs, DocumentRange r) {
  std::vector<int32_t> s;
  for (int64_t d = r.begin; d < r.end; ++d) s.insert(s.end(), docs[d].begin(), docs[d].end());
  return s;
}

std::vector<int32_t> row(const Tensor& t, int64_t r) {
  const int64_t S = t.dim(1);
  return std::vector<int32_t>(t.i32() + r * S, t.i32() + (r + 1) * S);
}

}  // namespace

TEST_CASE("data.split gives disjoint, covering, Megatron-style document ranges") {
  auto r = split_document_ranges("949,50,1", 1000);
  REQUIRE(r[0].begin == 0);
  REQUIRE(r[0].end == 949);
  REQUIRE(r[1].begin == 949);
  REQUIRE(r[1].end == 999);
  REQUIRE(r[2].begin == 999);
  REQUIRE(r[2].end == 1000);
  r = split_document_ranges("98/2", 10);  // missing test weight is 0; '/' works too
  REQUIRE(r[0].end == 10);                // round(9.8) = 10
  REQUIRE(r[1].size() == 0);
  REQUIRE(r[2].size() == 0);
  r = split_document_ranges("1,1,1", 10);  // bounds round(3.33)=3, round(6.67)=7
  REQUIRE(r[0].end == 3);
  REQUIRE(r[1].end == 7);
  for (const char* s : {"949,50,1", "1", "0.8, 0.1, 0.1", "0,1,0", "3,0,7", "1,1,1", "99,1,0"}) {
    for (int64_t n : {0, 1, 2, 3, 7, 10, 101, 12345}) {
      auto rr = split_document_ranges(s, n);
      REQUIRE(rr[0].begin == 0);
      REQUIRE(rr[0].end == rr[1].begin);
      REQUIRE(rr[1].end == rr[2].begin);
      REQUIRE(rr[2].end == n);
      for (auto& x : rr) REQUIRE(x.size() >= 0);
    }
  }
  for (const char* bad : {"", "a,b", "1,2,3,4", "-1,1", "0,0,0", "1,,2", "nan", "1;2"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(split_document_ranges(bad, 10), InputError);
    REQUIRE_THROWS_WITH(split_document_ranges(bad, 10), Catch::Contains("data.split"));
  }
}

TEST_CASE("EpochPermutation is a deterministic, seeded bijection") {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 255, 256, 257, 1000, 4097}) {
    EpochPermutation p(n, 42, 0);
    std::vector<char> seen(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = p(i);
      REQUIRE(v >= 0);
      REQUIRE(v < n);
      REQUIRE(seen[v] == 0);
      seen[v] = 1;
    }
  }
  auto order = [](uint64_t seed, uint64_t epoch) {
    EpochPermutation p(1000, seed, epoch);
    std::vector<int64_t> v;
    for (int64_t i = 0; i < 1000; ++i) v.push_back(p(i));
    return v;
  };
  REQUIRE(order(1, 0) == order(1, 0));
  REQUIRE(order(1, 0) != order(2, 0));
  REQUIRE(order(1, 0) != order(1, 1));
  std::vector<int64_t> identity(1000);
  for (int i = 0; i < 1000; ++i) identity[i] = i;
  REQUIRE(order(1, 0) != identity);
  // Golden values: the shuffle must not change between builds (resumed runs depend on it).
  EpochPermutation g(10, 1234, 0);
  std::vector<int64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(g(i));
  CAPTURE(first);
  REQUIRE(first == std::vector<int64_t>{4, 8, 6, 2, 3, 7, 1, 9, 0, 5});  // also what a Python port gives
}

TEST_CASE("shuffle off: sample k is tokens [kS, kS+S+1) of the train split; batch g is samples [gB, (g+1)B)") {
  TempDir dir("loader_contract");
  auto docs = make_docs(300);
  std::string prefix = write_docs(dir, docs);
  DataConfig cfg;
  cfg.path = prefix;
  cfg.split = "8,1,1";
  cfg.shuffle = false;
  const int64_t S = 16;
  BatchLoader loader(cfg, Split::kTrain, S);
  auto ranges = split_document_ranges(cfg.split, 300);
  REQUIRE(loader.documents().begin == 0);
  REQUIRE(loader.documents().end == 240);
  std::vector<int32_t> stream = stream_of(docs, ranges[0]);
  REQUIRE(loader.num_tokens() == static_cast<int64_t>(stream.size()));
  const int64_t n = (static_cast<int64_t>(stream.size()) - 1) / S;
  REQUIRE(loader.num_samples() == n);

  // Every sample, through GptSamples.
  std::vector<int32_t> buf(S + 1);
  for (int64_t k = 0; k < n; ++k) {
    REQUIRE(loader.samples().sample_for(k) == k);
    loader.samples().read_sample(k, buf.data());
    REQUIRE(buf == std::vector<int32_t>(stream.begin() + k * S, stream.begin() + k * S + S + 1));
  }
  // Micro-batches of global batches, including ones past the first epoch (wrap: k mod n).
  const int64_t B = 12, mb = 4;
  Tensor in = Tensor::empty({mb, S}, DType::kI32), tg = Tensor::empty({mb, S}, DType::kI32);
  const int64_t batches = (2 * n) / B + 2;
  for (int64_t g = 0; g < batches; ++g) {
    for (int64_t m = 0; m < B / mb; ++m) {
      loader.micro_batch(g, m, mb, B, in, tg);
      for (int64_t r = 0; r < mb; ++r) {
        int64_t k = (g * B + m * mb + r) % n;
        REQUIRE(row(in, r) == std::vector<int32_t>(stream.begin() + k * S, stream.begin() + k * S + S));
        REQUIRE(row(tg, r) == std::vector<int32_t>(stream.begin() + k * S + 1, stream.begin() + k * S + S + 1));
      }
    }
  }
  // The valid split is the next documents.
  BatchLoader valid(loader.dataset_ptr(), cfg, Split::kValid, S);
  std::vector<int32_t> vstream = stream_of(docs, ranges[1]);
  REQUIRE(valid.documents().begin == 240);
  valid.samples().read_sample(1, buf.data());
  REQUIRE(buf == std::vector<int32_t>(vstream.begin() + S, vstream.begin() + 2 * S + 1));
  // Wrong tensors are rejected.
  Tensor f = Tensor::empty({mb, S});
  REQUIRE_THROWS_AS(loader.micro_batch(0, 0, mb, B, f, tg), Error);
  REQUIRE_THROWS_AS(loader.micro_batch(0, 3, mb, B, in, tg), Error);
}

TEST_CASE("shuffle on: each epoch is a seeded permutation of the same samples") {
  TempDir dir("loader_shuffle");
  auto docs = make_docs(200);
  DataConfig cfg;
  cfg.path = write_docs(dir, docs);
  cfg.split = "1";
  cfg.shuffle = true;
  cfg.seed = 7;
  const int64_t S = 8;
  BatchLoader a(cfg, Split::kTrain, S), b(cfg, Split::kTrain, S);
  cfg.seed = 8;
  BatchLoader c(cfg, Split::kTrain, S);
  cfg.shuffle = false;
  BatchLoader plain(cfg, Split::kTrain, S);
  const int64_t n = a.num_samples();
  REQUIRE(n == plain.num_samples());
  REQUIRE(n > 50);

  std::set<std::vector<int32_t>> plain_samples;
  std::vector<int32_t> buf(S + 1);
  for (int64_t s = 0; s < n; ++s) {
    plain.samples().read_sample(s, buf.data());
    plain_samples.insert(buf);
  }
  Tensor in = Tensor::empty({1, S}, DType::kI32), tg = Tensor::empty({1, S}, DType::kI32);
  Tensor in2 = Tensor::empty({1, S}, DType::kI32), tg2 = Tensor::empty({1, S}, DType::kI32);
  std::vector<int64_t> epoch0, epoch1, other_seed;
  for (int64_t k = 0; k < 2 * n; ++k) {
    a.fill_samples(k, in, tg);
    b.fill_samples(k, in2, tg2);
    REQUIRE(row(in, 0) == row(in2, 0));  // deterministic for a seed
    REQUIRE(row(tg, 0) == row(tg2, 0));
    std::vector<int32_t> sample = row(in, 0);
    sample.push_back(row(tg, 0).back());
    REQUIRE(std::vector<int32_t>(sample.begin() + 1, sample.end()) == row(tg, 0));
    REQUIRE(plain_samples.count(sample) == 1);  // one of the same samples
    (k < n ? epoch0 : epoch1).push_back(a.samples().sample_for(k));
    if (k < n) other_seed.push_back(c.samples().sample_for(k));
  }
  std::vector<int64_t> identity(n);
  for (int64_t i = 0; i < n; ++i) identity[i] = i;
  auto sorted = [](std::vector<int64_t> v) { std::sort(v.begin(), v.end()); return v; };
  REQUIRE(sorted(epoch0) == identity);
  REQUIRE(sorted(epoch1) == identity);
  REQUIRE(epoch0 != identity);
  REQUIRE(epoch0 != epoch1);
  REQUIRE(epoch0 != other_seed);
}

TEST_CASE("loader errors name the split, the dataset and the sizes") {
  TempDir dir("loader_errors");
  auto docs = make_docs(20);
  DataConfig cfg;
  cfg.path = write_docs(dir, docs);
  cfg.split = "1,0,0";
  REQUIRE_THROWS_AS(BatchLoader(cfg, Split::kValid, 8), InputError);
  REQUIRE_THROWS_WITH(BatchLoader(cfg, Split::kValid, 8),
                      Catch::Contains("valid split") && Catch::Contains(cfg.path) && Catch::Contains("0 tokens") &&
                          Catch::Contains("seq_length + 1 = 9"));
  int64_t total = stream_of(docs, {0, 20}).size();
  REQUIRE_THROWS_WITH(BatchLoader(cfg, Split::kTrain, total),
                      Catch::Contains("train split") && Catch::Contains(std::to_string(total) + " tokens"));
  BatchLoader exact(cfg, Split::kTrain, total - 1);  // exactly one sample
  REQUIRE(exact.num_samples() == 1);
  cfg.split = "1,x";
  REQUIRE_THROWS_WITH(BatchLoader(cfg, Split::kTrain, 8), Catch::Contains("data.split"));
  cfg.split = "1";
  DataConfig empty = cfg;
  empty.path = "";
  REQUIRE_THROWS_WITH(BatchLoader(empty, Split::kTrain, 8), Catch::Contains("data.path"));
  empty.path = dir / "nope";
  REQUIRE_THROWS_WITH(BatchLoader(empty, Split::kTrain, 8), Catch::Contains(dir / "nope.idx"));
  // Tokens at or above the model's vocabulary.
  BatchLoader small_vocab(cfg, Split::kTrain, 8, /*vocab_size=*/1000);  // EOD is 1000
  REQUIRE(small_vocab.max_token_id() == 1000);
  Tensor in = Tensor::empty({4, 8}, DType::kI32), tg = Tensor::empty({4, 8}, DType::kI32);
  REQUIRE_THROWS_WITH(small_vocab.micro_batch(0, 0, 4, 4, in, tg),
                      Catch::Contains("model.vocab_size 1000") && Catch::Contains(cfg.path));
  BatchLoader ok_vocab(cfg, Split::kTrain, 8, 1001);
  ok_vocab.micro_batch(0, 0, 4, 4, in, tg);
}

TEST_CASE("many documents: 64-bit cumulative offsets and binary search") {
  TempDir dir("loader_many");
  const int64_t docs = 300000;
  std::string prefix = dir / "many";
  {
    IndexedDatasetWriter w(prefix, TokenDType::kU16);
    std::vector<int32_t> doc;
    for (int64_t d = 0; d < docs; ++d) {
      doc.assign(1 + d % 5, static_cast<int32_t>(d % 60000));
      w.add_document(doc);
    }
    w.finish();
  }
  DataConfig cfg;
  cfg.path = prefix;
  cfg.split = "1";
  cfg.shuffle = true;
  const int64_t S = 64;
  BatchLoader loader(cfg, Split::kTrain, S);
  REQUIRE(loader.num_tokens() == docs * 3);  // lengths 1..5 average 3
  Tensor in = Tensor::empty({8, S}, DType::kI32), tg = Tensor::empty({8, S}, DType::kI32);
  for (int64_t g = 0; g < 2000; ++g) loader.micro_batch(g, 0, 8, 8, in, tg);
  // The last token of the stream is the last document's.
  std::vector<int32_t> last(1);
  loader.samples().read_tokens(loader.num_tokens() - 1, 1, last.data());
  REQUIRE(last[0] == (docs - 1) % 60000);
}
