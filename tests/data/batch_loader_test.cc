// The sample contract: data.split ranges, samples of S+1 tokens overlapping by one, global batch
// g micro-batch m, epochs, seeded shuffling (documents and samples per epoch), and the loader's errors.
#include <algorithm>
#include <array>
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

using lattice::testing::gpt_samples;
using lattice::testing::loader_options;
using lattice::testing::make_docs;
using lattice::testing::row;
using lattice::testing::stream_of;
using lattice::testing::write_docs;

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
  // megatron-core's rule (bound_i = round(c_i * N), c_i the running sums of the normalized weights,
  // halves to even), derived by hand:
  // "1,1,1" over 10: round(3.33) = 3, round(6.67) = 7 -> 0,3,7,10. (Megatron-LM before megatron-core,
  // which rounded each size and shifted the bounds, gave 0,4,7,10.)
  r = split_document_ranges("1,1,1", 10);
  REQUIRE(r[0].end == 3);
  REQUIRE(r[1].end == 7);
  REQUIRE(r[2].end == 10);
  // "1,1,1" over 7: round(2.33) = 2, round(4.67) = 5.
  r = split_document_ranges("1,1,1", 7);
  REQUIRE(r[0].end == 2);
  REQUIRE(r[1].end == 5);
  // Ties, halves to even (Python's round): "1,1" over 5: round(2.5) = 2 (half up would give 3);
  // over 7: round(3.5) = 4.
  r = split_document_ranges("1,1", 5);
  REQUIRE(r[0].end == 2);
  REQUIRE(r[1].end == 5);
  REQUIRE(r[2].size() == 0);
  r = split_document_ranges("1,1", 7);
  REQUIRE(r[0].end == 4);
  REQUIRE(r[1].end == 7);
  // "969,30,1": bookends 0.969 and 0.999.
  //   N = 10:   round(9.69) = 10,    round(9.99) = 10
  //   N = 100:  round(96.9) = 97,    round(99.9) = 100
  //   N = 1001: round(969.969) = 970, round(999.999) = 1000
  //   N = 3:    round(2.907) = 3,    round(2.997) = 3
  //   N = 50:   round(48.45) = 48,   round(49.95) = 50
  //   N = 17:   round(16.473) = 16,  round(16.983) = 17
  //   N = 49:   round(47.481) = 47,  round(48.951) = 49
  for (auto [n, b1, b2] : std::vector<std::array<int64_t, 3>>{
           {10, 10, 10}, {100, 97, 100}, {1001, 970, 1000}, {3, 3, 3}, {50, 48, 50}, {17, 16, 17}, {49, 47, 49}}) {
    INFO(n);
    r = split_document_ranges("969,30,1", n);
    REQUIRE(r[0].end == b1);
    REQUIRE(r[1].end == b2);
    REQUIRE(r[2].end == n);
  }
  // A zero first weight: "0,1,1" over 3: bookends 0, 0.5, 1 -> 0, round(1.5) = 2, 3.
  r = split_document_ranges("0,1,1", 3);
  REQUIRE(r[0].size() == 0);
  REQUIRE(r[1].begin == 0);
  REQUIRE(r[1].end == 2);
  REQUIRE(r[2].begin == 2);
  REQUIRE(r[2].end == 3);
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
  auto samples = gpt_samples(cfg, Split::kTrain, S);
  auto ranges = split_document_ranges(cfg.split, 300);
  REQUIRE(samples->documents().begin == 0);
  REQUIRE(samples->documents().end == 240);
  std::vector<int32_t> stream = stream_of(docs, ranges[0]);
  REQUIRE(samples->num_tokens() == static_cast<int64_t>(stream.size()));
  const int64_t n = (static_cast<int64_t>(stream.size()) - 1) / S;
  REQUIRE(samples->num_samples() == n);

  // Every sample, through GptSamples, including epoch 1 (no document shuffle either).
  std::vector<int32_t> buf(S + 1);
  for (int64_t k = 0; k < 2 * n; ++k) {
    const int64_t p = k % n;
    REQUIRE(samples->sample_for(k) == p);
    samples->read(k, buf.data());
    REQUIRE(buf == std::vector<int32_t>(stream.begin() + p * S, stream.begin() + p * S + S + 1));
  }
  // Micro-batches of global batches, including ones past the first epoch (wrap: k mod n): random
  // access, in order, and in order through the prefetch thread.
  const int64_t B = 12, mb = 4;
  BatchLoader loader(samples, loader_options(mb, B));
  BatchLoader prefetched(samples, loader_options(mb, B, 0, 1, /*prefetch=*/3));
  Tensor in = Tensor::empty({mb, S}, DType::kI32), tg = Tensor::empty({mb, S}, DType::kI32);
  Tensor in2 = Tensor::empty({mb, S}, DType::kI32), tg2 = Tensor::empty({mb, S}, DType::kI32);
  const int64_t batches = (2 * n) / B + 2;
  for (int64_t g = 0; g < batches; ++g) {
    for (int64_t m = 0; m < B / mb; ++m) {
      loader.micro_batch(g, m, in, tg);
      for (int64_t r = 0; r < mb; ++r) {
        int64_t k = (g * B + m * mb + r) % n;
        REQUIRE(row(in, r) == std::vector<int32_t>(stream.begin() + k * S, stream.begin() + k * S + S));
        REQUIRE(row(tg, r) == std::vector<int32_t>(stream.begin() + k * S + 1, stream.begin() + k * S + S + 1));
      }
      prefetched.next(in2, tg2);
      REQUIRE(row(in2, 0) == row(in, 0));
      REQUIRE(row(tg2, mb - 1) == row(tg, mb - 1));
      REQUIRE(prefetched.consumed_samples() == g * B + (m + 1) * mb);
    }
  }
  // The valid split is the next documents.
  auto valid = gpt_samples(cfg, Split::kValid, S);
  std::vector<int32_t> vstream = stream_of(docs, ranges[1]);
  REQUIRE(valid->documents().begin == 240);
  valid->read(1, buf.data());
  REQUIRE(buf == std::vector<int32_t>(vstream.begin() + S, vstream.begin() + 2 * S + 1));
  // Wrong tensors are rejected.
  Tensor f = Tensor::empty({mb, S});
  REQUIRE_THROWS_AS(loader.micro_batch(0, 0, f, tg), Error);
  REQUIRE_THROWS_AS(loader.micro_batch(0, 3, in, tg), Error);
  REQUIRE_THROWS_AS(prefetched.next(f, tg), Error);
}

TEST_CASE("shuffle on: per epoch a seeded document order and a seeded permutation of its samples") {
  TempDir dir("loader_shuffle");
  auto docs = make_docs(200);
  DataConfig cfg;
  cfg.path = write_docs(dir, docs);
  cfg.split = "1";
  cfg.shuffle = true;
  cfg.seed = 7;
  const int64_t S = 8;
  auto a = gpt_samples(cfg, Split::kTrain, S), b = gpt_samples(cfg, Split::kTrain, S);
  cfg.seed = 8;
  auto c = gpt_samples(cfg, Split::kTrain, S);
  cfg.shuffle = false;
  auto plain = gpt_samples(cfg, Split::kTrain, S);
  const int64_t n = a->num_samples();
  REQUIRE(n == plain->num_samples());
  REQUIRE(n > 50);
  const int64_t ndocs = a->documents().size();

  auto doc_order = [&](const GptSamples& g, int64_t e) {
    std::vector<int64_t> order;
    for (int64_t j = 0; j < ndocs; ++j) order.push_back(g.document_at(e, j));
    return order;
  };
  std::vector<int64_t> identity_docs(ndocs), identity(n);
  for (int64_t i = 0; i < ndocs; ++i) identity_docs[i] = i;
  for (int64_t i = 0; i < n; ++i) identity[i] = i;
  auto sorted = [](std::vector<int64_t> v) { std::sort(v.begin(), v.end()); return v; };
  // Documents: a permutation per epoch, different between epochs and seeds, same for a seed.
  for (int64_t e = 0; e < 3; ++e) {
    REQUIRE(sorted(doc_order(*a, e)) == identity_docs);
    REQUIRE(doc_order(*a, e) != identity_docs);
    REQUIRE(doc_order(*a, e) == doc_order(*b, e));
    REQUIRE(doc_order(*a, e) != doc_order(*c, e));
  }
  REQUIRE(doc_order(*a, 0) != doc_order(*a, 1));
  REQUIRE(doc_order(*plain, 1) == identity_docs);

  std::vector<int32_t> buf(S + 1), buf2(S + 1);
  std::vector<int64_t> epoch0, epoch1, other_seed;
  for (int64_t k = 0; k < 2 * n; ++k) {
    const int64_t e = k / n;
    a->read(k, buf.data());
    b->read(k, buf2.data());
    REQUIRE(buf == buf2);  // deterministic for a seed
    // Sample k is window sample_for(k) of epoch e's document-shuffled stream.
    std::vector<int32_t> stream;
    for (int64_t d : doc_order(*a, e)) stream.insert(stream.end(), docs[d].begin(), docs[d].end());
    const int64_t s = a->sample_for(k);
    REQUIRE(buf == std::vector<int32_t>(stream.begin() + s * S, stream.begin() + s * S + S + 1));
    const SampleLocation loc = a->locate(k);
    REQUIRE(loc.epoch == e);
    REQUIRE(loc.sample == s);
    REQUIRE(loc.document == doc_order(*a, e)[loc.doc_pos]);
    REQUIRE(loc.offset < static_cast<int64_t>(docs[loc.document].size()));
    REQUIRE(docs[loc.document][loc.offset] == buf[0]);
    (k < n ? epoch0 : epoch1).push_back(s);
    if (k < n) other_seed.push_back(c->sample_for(k));
  }
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
  auto make = [&](const DataConfig& c, Split split, int64_t S) { return make_split_samples(c, open_datasets(c), split, S); };
  REQUIRE_THROWS_AS(make(cfg, Split::kValid, 8), InputError);
  REQUIRE_THROWS_WITH(make(cfg, Split::kValid, 8),
                      Catch::Contains("valid split") && Catch::Contains(cfg.path) && Catch::Contains("0 tokens") &&
                          Catch::Contains("seq_length + 1 = 9"));
  int64_t total = stream_of(docs, {0, 20}).size();
  REQUIRE_THROWS_WITH(make(cfg, Split::kTrain, total),
                      Catch::Contains("train split") && Catch::Contains(std::to_string(total) + " tokens"));
  REQUIRE(gpt_samples(cfg, Split::kTrain, total - 1)->num_samples() == 1);  // exactly one sample
  cfg.split = "1,x";
  REQUIRE_THROWS_WITH(make(cfg, Split::kTrain, 8), Catch::Contains("data.split"));
  cfg.split = "1";
  DataConfig empty = cfg;
  empty.path = "";
  REQUIRE_THROWS_WITH(make(empty, Split::kTrain, 8), Catch::Contains("data.path") && Catch::Contains("data.blend"));
  empty.path = dir / "nope";
  REQUIRE_THROWS_WITH(make(empty, Split::kTrain, 8), Catch::Contains(dir / "nope.idx"));
  DataConfig both = cfg;
  both.blend = {{1.0, cfg.path}};
  REQUIRE_THROWS_WITH(make(both, Split::kTrain, 8), Catch::Contains("data.path") && Catch::Contains("data.blend"));
  DataConfig missing_blend;
  missing_blend.blend = {{1.0, cfg.path}, {2.0, dir / "nope"}};
  REQUIRE_THROWS_WITH(make(missing_blend, Split::kTrain, 8),
                      Catch::Contains("data.blend[1][1]") && Catch::Contains(dir / "nope.idx"));
  // Tokens at or above the model's vocabulary (EOD is 1000), from the loader and its prefetch thread.
  auto samples = make(cfg, Split::kTrain, 8);
  Tensor in = Tensor::empty({4, 8}, DType::kI32), tg = Tensor::empty({4, 8}, DType::kI32);
  BatchLoader small_vocab(samples, loader_options(4, 4, 0, 1, 0, /*vocab=*/1000));
  REQUIRE_THROWS_WITH(small_vocab.micro_batch(0, 0, in, tg),
                      Catch::Contains("model.vocab_size 1000") && Catch::Contains(cfg.path));
  BatchLoader small_vocab_prefetch(samples, loader_options(4, 4, 0, 1, 2, /*vocab=*/1000));
  REQUIRE_THROWS_WITH(small_vocab_prefetch.next(in, tg), Catch::Contains("model.vocab_size 1000"));
  BatchLoader ok_vocab(samples, loader_options(4, 4, 0, 1, 2, 1001));
  ok_vocab.micro_batch(0, 0, in, tg);
  ok_vocab.next(in, tg);
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
  auto samples = gpt_samples(cfg, Split::kTrain, S);
  REQUIRE(samples->num_tokens() == docs * 3);  // lengths 1..5 average 3
  BatchLoader loader(samples, loader_options(8, 8, 0, 1, 4));
  Tensor in = Tensor::empty({8, S}, DType::kI32), tg = Tensor::empty({8, S}, DType::kI32);
  for (int64_t g = 0; g < 2000; ++g) loader.next(in, tg);
  REQUIRE(loader.consumed_samples() == 16000);
  // The last token of the stream is the last document's.
  std::vector<int32_t> last(1);
  samples->read_tokens(samples->num_tokens() - 1, 1, last.data());
  REQUIRE(last[0] == (docs - 1) % 60000);
}
