// Blending (Megatron's greedy rule, shares, per-dataset splits), resuming from consumed samples
// with shuffle, blending and data-parallel views, and the prefetch thread.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#include "data/batch_loader.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/prefetcher.h"
#include "kernels/error.h"
#include "kernels/tensor.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::loader_options;
using lattice::testing::make_docs;
using lattice::testing::row;
using lattice::testing::TempDir;
using lattice::testing::write_docs;

namespace {

// Three datasets of different sizes and token patterns, blended 5:3:2.
DataConfig blend_config(const TempDir& dir) {
  DataConfig cfg;
  cfg.blend = {{5.0, write_docs(dir, make_docs(300, 0), "a")},
               {3.0, write_docs(dir, make_docs(120, 1), "b")},
               {2.0, write_docs(dir, make_docs(500, 2), "c")}};
  cfg.split = "8,1,1";
  cfg.shuffle = true;
  cfg.seed = 99;
  return cfg;
}

std::vector<int32_t> sample_of(const SampleSource& s, int64_t k) {
  std::vector<int32_t> buf(s.seq_length() + 1);
  s.read(k, buf.data());
  return buf;
}

}  // namespace

TEST_CASE("blending follows Megatron's rule; shares within 1% of the weights over 1e5 samples") {
  TempDir dir("blend_shares");
  const DataConfig cfg = blend_config(dir);
  const int64_t S = 8;
  auto source = make_split_samples(cfg, open_datasets(cfg), Split::kTrain, S);
  auto blended = std::dynamic_pointer_cast<const BlendedSamples>(source);
  REQUIRE(blended != nullptr);
  REQUIRE(blended->num_sources() == 3);
  const std::vector<double> w = {0.5, 0.3, 0.2};

  // An independent, direct implementation of Megatron's argmax_i w_i*max(n, 1) - count_i (ties to
  // the lowest i). 5:3:2 normalizes (twice, as Megatron does) to exactly the doubles 0.5, 0.3, 0.2.
  // It has exact ties (e.g. n = 10: 5 - 5 = 3 - 3 = 2 - 2 = 0), so this file is built with
  // -ffp-contract=off like data/blended_dataset.cc (tests/data/BUILD.bazel): an FMA would break them
  // differently. tests/data/megatron_reference_test checks the rule against a Python port of
  // Megatron's helpers.cpp.
  REQUIRE(blended->weights() == w);
  const int64_t total = 100000;
  std::vector<int64_t> counts(3, 0);
  std::vector<BlendedSamples::Choice> expected;
  for (int64_t n = 0; n < total; ++n) {
    const double x = std::max(static_cast<double>(n), 1.0);
    int64_t best = 0;
    for (int64_t i = 1; i < 3; ++i)
      if (w[i] * x - counts[i] > w[best] * x - counts[best]) best = i;
    expected.push_back({best, counts[best]});
    ++counts[best];
  }
  for (int64_t i = 0; i < 3; ++i) {
    const double share = static_cast<double>(counts[i]) / total;
    CAPTURE(i, share);
    REQUIRE(std::fabs(share - w[i]) <= 0.01 * w[i]);
  }
  // The snapshot-based lookup agrees everywhere, also when asked out of order (fresh object).
  for (int64_t n = 0; n < total; ++n) {
    const auto c = blended->choose(n);
    REQUIRE(c.source == expected[n].source);
    REQUIRE(c.sample == expected[n].sample);
  }
  auto fresh = std::dynamic_pointer_cast<const BlendedSamples>(make_split_samples(cfg, open_datasets(cfg), Split::kTrain, S));
  for (int64_t n : {99999, 5, 4096, 1023, 1024, 77777, 0}) {
    const auto c = fresh->choose(n);
    REQUIRE(c.source == expected[n].source);
    REQUIRE(c.sample == expected[n].sample);
  }
  // Sample n is that dataset's sample.
  for (int64_t n = 0; n < 3000; n += 7)
    REQUIRE(sample_of(*blended, n) == sample_of(blended->source(expected[n].source), expected[n].sample));
}

TEST_CASE("blending: every dataset is split by documents on its own; the splits are disjoint") {
  TempDir dir("blend_splits");
  const DataConfig cfg = blend_config(dir);
  const auto datasets = open_datasets(cfg);
  const int64_t S = 4;
  std::vector<std::shared_ptr<const BlendedSamples>> splits;
  for (Split sp : {Split::kTrain, Split::kValid, Split::kTest})
    splits.push_back(std::dynamic_pointer_cast<const BlendedSamples>(make_split_samples(cfg, datasets, sp, S)));
  for (int64_t i = 0; i < 3; ++i) {
    const auto expected = split_document_ranges(cfg.split, datasets[i]->num_documents());
    std::vector<std::set<int64_t>> used(3);
    for (int sp = 0; sp < 3; ++sp) {
      const auto& g = dynamic_cast<const GptSamples&>(splits[sp]->source(i));
      REQUIRE(g.documents().begin == expected[sp].begin);
      REQUIRE(g.documents().end == expected[sp].end);
      REQUIRE(&g.dataset() == datasets[i].get());
      // The documents samples actually start in (two epochs, shuffled) lie in the split's range.
      for (int64_t k = 0; k < 2 * g.num_samples(); ++k) {
        const SampleLocation loc = g.locate(k);
        REQUIRE(loc.document >= expected[sp].begin);
        REQUIRE(loc.document < expected[sp].end);
        used[sp].insert(loc.document);
      }
    }
    for (int a = 0; a < 3; ++a)
      for (int b = a + 1; b < 3; ++b)
        for (int64_t d : used[a]) REQUIRE(used[b].count(d) == 0);
    REQUIRE(expected[0].end == expected[1].begin);
    REQUIRE(expected[1].end == expected[2].begin);
  }
}

TEST_CASE("resume from consumed samples reproduces the run, with shuffle, blending and DP ranks") {
  TempDir dir("resume");
  const DataConfig cfg = blend_config(dir);
  const int64_t S = 8, mb = 2, B = 12, D = 3, steps = 40;  // M = 2 micro-batches per rank and step
  auto samples = make_split_samples(cfg, open_datasets(cfg), Split::kTrain, S);
  const int64_t M = B / (mb * D);
  Tensor in = Tensor::empty({mb, S}, DType::kI32), tg = Tensor::empty({mb, S}, DType::kI32);
  Tensor gin = Tensor::empty({B, S}, DType::kI32), gtg = Tensor::empty({B, S}, DType::kI32);
  BatchLoader global(samples, loader_options(B, B));

  // Uninterrupted runs of every DP rank (with prefetch), micro-batch rows per step.
  std::vector<std::vector<std::vector<std::vector<int32_t>>>> run(D);  // [rank][step] -> rows
  for (int64_t r = 0; r < D; ++r) {
    BatchLoader loader(samples, loader_options(mb, B, r, D, /*prefetch=*/3));
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<std::vector<int32_t>> rows;
      for (int64_t m = 0; m < M; ++m) {
        loader.next(in, tg);
        for (int64_t i = 0; i < mb; ++i) {
          auto x = row(in, i);
          x.push_back(row(tg, i).back());
          rows.push_back(x);
        }
      }
      REQUIRE(loader.consumed_samples() == (step + 1) * B);
      run[r].push_back(rows);
    }
  }
  // The DP ranks' rows, rank after rank, are exactly the global batch [g*B, (g+1)*B).
  for (int64_t g = 0; g < steps; ++g) {
    global.micro_batch(g, 0, gin, gtg);
    int64_t k = 0;
    for (int64_t r = 0; r < D; ++r) {
      for (const auto& x : run[r][g]) {
        REQUIRE(std::vector<int32_t>(x.begin(), x.end() - 1) == row(gin, k));
        REQUIRE(x.back() == row(gtg, k).back());
        REQUIRE(x == sample_of(*samples, g * B + k));
        ++k;
      }
    }
    REQUIRE(k == B);
  }
  // Resume at step k in a "new process" (fresh datasets and sample objects): steps k.. are the same.
  for (int64_t k : {1, 7, 23}) {
    auto fresh = make_split_samples(cfg, open_datasets(cfg), Split::kTrain, S);
    for (int64_t r = 0; r < D; ++r) {
      BatchLoader resumed(fresh, loader_options(mb, B, r, D, 2), /*consumed_samples=*/k * B);
      BatchLoader sought(fresh, loader_options(mb, B, r, D, 0));
      sought.next(in, tg);
      sought.seek(k * B);
      for (int64_t step = k; step < steps; ++step) {
        int64_t i = 0;
        for (int64_t m = 0; m < M; ++m) {
          resumed.next(in, tg);
          for (int64_t j = 0; j < mb; ++j, ++i) {
            REQUIRE(row(in, j) == std::vector<int32_t>(run[r][step][i].begin(), run[r][step][i].end() - 1));
            REQUIRE(row(tg, j).back() == run[r][step][i].back());
          }
          Tensor in2 = Tensor::empty({mb, S}, DType::kI32), tg2 = Tensor::empty({mb, S}, DType::kI32);
          sought.next(in2, tg2);
          REQUIRE(row(in2, 0) == row(in, 0));
        }
      }
    }
  }
  BatchLoader l(samples, loader_options(mb, B, 0, D));
  REQUIRE_THROWS_AS(l.seek(5), InputError);  // not a multiple of mb * D
}

TEST_CASE("prefetcher: in order, exceptions reach the caller, the destructor joins") {
  {
    std::string thread_name;  // written by item 10's produce(), read after next() returned it
    Prefetcher<int64_t> p(10, 3, [&](int64_t i, int64_t& out) {
      if (i == 10) {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        thread_name = name;
      }
      out = i * i;
    });
    for (int64_t i = 10; i < 200; ++i) REQUIRE(p.next() == i * i);
    CHECK(thread_name == "lt-prefetch");  // named for profilers and debuggers
  }
  {
    Prefetcher<int64_t> p(0, 2, [](int64_t i, int64_t& out) {
      if (i == 5) throw std::runtime_error("disk on fire at item 5");
      out = i;
    });
    for (int64_t i = 0; i < 5; ++i) REQUIRE(p.next() == i);
    REQUIRE_THROWS_WITH(p.next(), "disk on fire at item 5");
    REQUIRE_THROWS_WITH(p.next(), "disk on fire at item 5");  // stays failed
  }
  // Destroyed while the queue is full and while produce() is running: joins, nothing runs after.
  std::atomic<int64_t> produced{0};
  {
    Prefetcher<int64_t> p(0, 2, [&](int64_t i, int64_t& out) {
      produced++;
      out = i;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(produced.load() == 2);  // bounded: depth 2, nothing consumed
  }
  {
    Prefetcher<int64_t> p(0, 4, [&](int64_t i, int64_t& out) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      out = i;
    });
    REQUIRE(p.next() == 0);
  }  // destructor waits for the running produce() and returns
  const int64_t after = produced.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(produced.load() == after);

  // A loader's data is identical with and without prefetch, across a seek.
  TempDir dir("prefetch_same");
  const DataConfig cfg = blend_config(dir);
  auto samples = make_split_samples(cfg, open_datasets(cfg), Split::kTrain, 16);
  BatchLoader plain(samples, loader_options(4, 8, 1, 2, 0)), fast(samples, loader_options(4, 8, 1, 2, 4));
  Tensor a = Tensor::empty({4, 16}, DType::kI32), at = Tensor::empty({4, 16}, DType::kI32);
  Tensor b = Tensor::empty({4, 16}, DType::kI32), bt = Tensor::empty({4, 16}, DType::kI32);
  for (int64_t i = 0; i < 300; ++i) {
    if (i == 150) {
      plain.seek(800);
      fast.seek(800);
    }
    plain.next(a, at);
    fast.next(b, bt);
    for (int64_t r = 0; r < 4; ++r) {
      REQUIRE(row(a, r) == row(b, r));
      REQUIRE(row(at, r) == row(bt, r));
    }
    REQUIRE(plain.consumed_samples() == fast.consumed_samples());
  }
}
