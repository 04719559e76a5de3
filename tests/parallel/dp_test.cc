// Multi-rank tests of data parallelism (run under mpirun -np 2 and -np 4): gradient buckets reduce
// to the mean over ranks (overlap on and off, several bucket sizes, launch only on complete
// buckets; in f32 and in bf16), and the optimizer — sharded (distributed optimizer) or stepping the
// whole model on the all-reduced gradients — equals one-process AdamW on the mean gradient; with
// bf16 parameters its fp32 main shards and bf16 gathers equal the unsharded optimizer's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "model/parameter_store.h"
#include "parallel/exact_sum.h"
#include "parallel/grad_buckets.h"
#include "parallel/optimizer.h"
#include "parallel/param_grad_buffer.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

// Whether this run's shapes divide by 4 (dp_test.sh in_place: LATTICE_TEST_DIVISIBLE_SHAPES=1), so
// that every bucket splits evenly over dp 2 and 4 and the distributed optimizer reduce-scatters and
// gathers in place; the [sharded] tests then run on that layout.
bool divisible_shapes() {
  static const bool divisible = std::getenv("LATTICE_TEST_DIVISIBLE_SHAPES") != nullptr;
  return divisible;
}

// Sizes chosen so that buckets and dp shards cut parameters in the middle and need padding (or,
// divisible_shapes(), cut them in the middle without padding).
std::vector<ParamSpec> specs() {
  const bool d = divisible_shapes();
  return {
      {"embed.weight", {7, d ? 4 : 3}, InitKind::kNormal, 0.02f, true},
      {"ln.weight", {d ? 8 : 5}, InitKind::kOnes, 0.02f, false},
      {"fc1.weight", {6, 4}, InitKind::kNormal, 0.02f, true},
      {"fc1.bias", {d ? 12 : 13}, InitKind::kZeros, 0.02f, false},
      {"fc2.weight", {3, d ? 12 : 11}, InitKind::kNormal, 0.02f, true},
      {"fc2.bias", {d ? 4 : 1}, InitKind::kZeros, 0.02f, false},
  };
}

float grad_of(int64_t i, int rank, int step) {
  return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(step)) * 0.5f +
         0.25f * static_cast<float>(rank) * std::cos(0.11f * static_cast<float>(i));
}

void fill_grads(ParameterStore& store, int rank, int step) {
  float* g = store.flat_grads().f32();
  for (int64_t i = 0; i < store.numel(); ++i) g[i] = grad_of(i, rank, step);
}

std::vector<float> mean_grads(int64_t n, int dp, int step) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (int r = 0; r < dp; ++r) s += grad_of(i, r, step);
    out[i] = static_cast<float>(s / dp);
  }
  return out;
}

// |a - b| / max(floor, |b|). Gradients are sums of O(1) terms, so their float rounding error is
// relative to the terms (floor 1), not to a mean that may cancel to near zero.
double max_rel_diff(const float* a, const std::vector<float>& b, double floor = 1e-3) {
  double worst = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(floor, std::fabs(static_cast<double>(b[i])));
    worst = std::max(worst, d);
  }
  return worst;
}

// The dp-only gradient norm: this rank's norm views summed in order, summed over dp when sharded
// (the trainer's norm also sums over tp and pp).
double dp_grad_norm(const Optimizer& opt, Communicator& dp) {
  double local = 0.0;
  for (const Tensor& g : opt.norm_grads()) local += ops::sum_squares(g);
  return std::sqrt(opt.sharded() ? exact_sum(dp, local) : local);
}

// bucket sizes in MiB: one bucket per parameter, a few parameters per bucket, one for all.
const double kSizes[] = {1e-9, 100.0 * 4 / (1024.0 * 1024.0), 0.0};

TEST_CASE("bucket layout: reverse parameter order, boundaries respected, shards cover buckets") {
  ParameterStore store(specs(), host_context());
  const int dp = world().size();
  auto one_each = make_grad_buckets(store, 1e-9, dp);
  REQUIRE(one_each.size() == store.count());
  for (size_t b = 0; b < one_each.size(); ++b) {
    CHECK(one_each[b].first_param == store.count() - 1 - b);
    CHECK(one_each[b].last_param == store.count() - 1 - b);
  }
  auto all = make_grad_buckets(store, 0.0, dp);
  REQUIRE(all.size() == 1);
  CHECK(all[0].begin == 0);
  CHECK(all[0].end == store.numel());
  auto mid = make_grad_buckets(store, 40.0 * 4 / (1024.0 * 1024.0), dp);  // >= 40 elements each
  int64_t end = store.numel(), shard = 0;
  for (const GradBucket& b : mid) {
    CHECK(b.end == end);
    CHECK(b.begin < b.end);
    CHECK(b.shard_numel * dp >= b.numel());
    CHECK((b.shard_numel - 1) * dp < b.numel());
    CHECK(b.shard_offset == shard);
    if (b.first_param > 0) CHECK(b.numel() >= 40);
    end = b.begin;
    shard += b.shard_numel;
  }
  CHECK(end == 0);
  CHECK(mid.size() > 1);
}

TEST_CASE("gradient buckets all_reduce to the mean over ranks, overlap on and off") {
  auto& w = world();
  for (double size : kSizes) {
    for (bool overlap : {false, true}) {
      CAPTURE(size, overlap);
      ParameterStore store(specs(), host_context());
      GradBuckets buckets(store, w, {size, overlap, false});
      for (int step = 0; step < 2; ++step) {
        fill_grads(store, w.rank(), step);
        for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
        CHECK(buckets.launched() == (overlap ? static_cast<int>(buckets.buckets().size()) : 0));
        buckets.finish();
        CHECK(buckets.launched() == 0);
        CHECK(max_rel_diff(store.flat_grads().f32(), mean_grads(store.numel(), w.size(), step), 1.0) <= 1e-6);
        CHECK(buckets.last_stats().wait_s <= buckets.last_stats().comm_s);
        if (!overlap) CHECK(buckets.last_stats().wait_s == buckets.last_stats().comm_s);
      }
    }
  }
}

TEST_CASE("mark_ready launches a bucket only when complete, and buckets in order") {
  auto& w = world();
  ParameterStore store(specs(), host_context());
  GradBuckets buckets(store, w, {1e-9, true, false});  // one bucket per parameter
  const size_t n = store.count();
  fill_grads(store, w.rank(), 0);
  buckets.mark_ready(0);  // the last bucket: complete, but earlier buckets are not
  CHECK(buckets.launched() == 0);
  buckets.mark_ready(n - 1);
  CHECK(buckets.launched() == 1);
  buckets.mark_ready(n - 3);  // bucket 2 complete, bucket 1 not yet
  CHECK(buckets.launched() == 1);
  buckets.mark_ready(n - 2);
  CHECK(buckets.launched() == 3);
  CHECK_THROWS(buckets.mark_ready(n - 2));
  for (size_t p = 1; p < n - 3; ++p) buckets.mark_ready(p);
  CHECK(buckets.launched() == static_cast<int>(n));
  buckets.finish();
  CHECK(max_rel_diff(store.flat_grads().f32(), mean_grads(store.numel(), w.size(), 0), 1.0) <= 1e-6);

  // Several parameters per bucket: launched only after the bucket's last parameter is marked.
  ParameterStore store2(specs(), host_context());
  GradBuckets big(store2, w, {40.0 * 4 / (1024.0 * 1024.0), true, false});
  REQUIRE(big.buckets().size() >= 2);
  const GradBucket& b0 = big.buckets()[0];
  REQUIRE(b0.last_param > b0.first_param);
  fill_grads(store2, w.rank(), 1);
  for (size_t p = b0.last_param; p > b0.first_param; --p) big.mark_ready(p);
  CHECK(big.launched() == 0);
  big.mark_ready(b0.first_param);
  CHECK(big.launched() == 1);
  big.finish();
  CHECK(max_rel_diff(store2.flat_grads().f32(), mean_grads(store2.numel(), w.size(), 1), 1.0) <= 1e-6);
}

// In place (divisible shapes) each rank's shard is its block of the flat gradients; else packed.
TEST_CASE("reduce_scatter mode gives each rank its shard of the mean", "[sharded]") {
  auto& w = world();
  for (double size : kSizes) {
    for (bool overlap : {false, true}) {
      CAPTURE(size, overlap);
      ParameterStore store(specs(), host_context());
      GradBuckets buckets(store, w, {size, overlap, true});
      CHECK(buckets.in_place() == divisible_shapes());
      fill_grads(store, w.rank(), 0);
      for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
      buckets.finish();
      const auto mean = mean_grads(store.numel(), w.size(), 0);
      for (size_t bi = 0; bi < buckets.buckets().size(); ++bi) {
        const GradBucket& b = buckets.buckets()[bi];
        const Tensor shard = buckets.shard(bi);
        if (buckets.in_place()) CHECK(shard.f32() == store.flat_grads().f32() + b.begin + w.rank() * b.shard_numel);
        for (int64_t k = 0; k < b.shard_numel; ++k) {
          const int64_t flat = b.begin + w.rank() * b.shard_numel + k;
          const float expect = flat < b.end ? mean[flat] : 0.0f;
          CHECK(std::fabs(shard.f32()[k] - expect) <= 1e-6f);
        }
      }
    }
  }
}

float round_bf16(float x) { return bfloat16_to_float(float_to_bfloat16(x)); }

// What this rank holds after finish(): (flat index, value) of every flat gradient, or in
// reduce_scatter mode of every element of its shard (flat index -1: padding).
std::vector<std::pair<int64_t, float>> reduced(GradBuckets& buckets) {
  std::vector<std::pair<int64_t, float>> out;
  if (!buckets.options().reduce_scatter) {
    const float* g = buckets.buffer().flat_grads().f32();
    for (int64_t i = 0; i < buckets.buffer().numel(); ++i) out.emplace_back(i, g[i]);
    return out;
  }
  for (size_t bi = 0; bi < buckets.buckets().size(); ++bi) {
    const GradBucket& b = buckets.buckets()[bi];
    const Tensor shard = buckets.shard(bi);
    for (int64_t k = 0; k < b.shard_numel; ++k) {
      const int64_t flat = b.begin + buckets.dp_rank() * b.shard_numel + k;
      out.emplace_back(flat < b.end ? flat : -1, shard.f32()[k]);
    }
  }
  return out;
}

// The bf16 reduction of rank r's g_r: each g_r / dp (exact: dp is 2 or 4) rounded to bf16 (dp
// roundings), then summed with every combine rounded (dp - 1 more). Each rounding errs by at most
// 2^-8 of a value bounded by S = sum_r |g_r| / dp (up to a factor (1 + 2^-8)^dp), so
// |bf16 - f32| <= (2 dp - 1) 2^-8 S, plus the f32 reduction's own few ulps of S. For 2 ranks the
// result is exactly round(round(g_0 / 2) + round(g_1 / 2)).
TEST_CASE("bf16 gradient reduction: within its rounding bound of the f32 one, exact for 2 ranks") {
  auto& w = world();
  const int dp = w.size();
  for (double size : kSizes) {
    for (bool scatter : {false, true}) {
      for (bool overlap : {false, true}) {
        CAPTURE(size, scatter, overlap);
        ParameterStore f32_store(specs(), host_context()), bf16_store(specs(), host_context());
        GradBuckets f32_buckets(f32_store, w, {size, overlap, scatter});
        GradBuckets bf16_buckets(bf16_store, w, {size, overlap, scatter, DType::kBF16});
        for (int step = 0; step < 2; ++step) {  // the second step reuses the staging buffers
          for (auto [store, buckets] : {std::pair{&f32_store, &f32_buckets}, {&bf16_store, &bf16_buckets}}) {
            fill_grads(*store, w.rank(), step);
            for (size_t p = store->count(); p-- > 0;) buckets->mark_ready(p);
            CHECK(buckets->launched() == (overlap ? static_cast<int>(buckets->buckets().size()) : 0));
            buckets->finish();
            CHECK(buckets->last_stats().wait_s <= buckets->last_stats().comm_s);
          }
          const auto f32 = reduced(f32_buckets), bf16 = reduced(bf16_buckets);
          REQUIRE(f32.size() == bf16.size());
          for (size_t j = 0; j < f32.size(); ++j) {
            const auto [flat, got] = bf16[j];
            INFO("step " << step << ", flat element " << flat);
            if (flat < 0) {
              CHECK(got == 0.0f);
              continue;
            }
            CHECK(got == round_bf16(got));  // the sum was rounded to bf16
            double s = 0.0;
            for (int r = 0; r < dp; ++r) s += std::fabs(grad_of(flat, r, step)) / dp;
            CHECK(std::fabs(got - f32[j].second) <= (2 * dp - 1) * std::ldexp(s, -8) * 1.05 + 1e-6 * s);
            if (dp == 2) {
              CHECK(got == round_bf16(round_bf16(grad_of(flat, 0, step) * 0.5f) +
                                      round_bf16(grad_of(flat, 1, step) * 0.5f)));
            }
          }
        }
      }
    }
  }
}

// One-process reference: AdamW per parameter (ops::adamw_update, decay only on decay params) on
// the mean gradient, with the trainer's math.
struct Reference {
  ParameterStore store{specs(), host_context()};
  std::vector<Tensor> m, v;
  Reference() {
    store.initialize(1234);
    for (size_t i = 0; i < store.count(); ++i) {
      m.push_back(Tensor::zeros(store.spec(i).shape));
      v.push_back(Tensor::zeros(store.spec(i).shape));
    }
  }
  void step(const std::vector<float>& mean, int64_t t, double lr, float scale, const OptimizerOptions& c) {
    std::copy(mean.begin(), mean.end(), store.flat_grads().f32());
    for (size_t i = 0; i < store.count(); ++i) {
      ops::AdamWParams p{static_cast<float>(lr), static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                         static_cast<float>(c.eps),
                         store.spec(i).weight_decay ? static_cast<float>(c.weight_decay) : 0.0f, t, scale};
      ops::adamw_update(store.value(i), store.grad(i), m[i], v[i], p);
    }
  }
};

// Tolerance 1e-6 relative: every element goes through the identical fp32 operations
// (ops::adamw_update with the same hyper-parameters and step) in both runs; the only difference is
// the mean gradient's summation order (MPI's reduction of x_r/dp vs the reference's double sum),
// a few ulps that AdamW's normalised update m/sqrt(v) does not amplify.
TEST_CASE("distributed optimizer: 3 AdamW steps equal one-process AdamW on the mean gradient", "[sharded]") {
  auto& w = world();
  for (double size : kSizes) {
    for (bool overlap : {false, true}) {
      CAPTURE(size, overlap);
      OptimizerOptions config{0.9, 0.95, 1e-8, 0.5, overlap};
      Reference ref;
      ParameterStore store(specs(), host_context());
      store.initialize(1234);
      GradBuckets buckets(store, w, {size, true, true});
      Optimizer opt(buckets, config);
      for (int step = 0; step < 3; ++step) {
        const double lr = 0.05 * (step + 1);
        const float scale = step == 1 ? 0.5f : 1.0f;
        fill_grads(store, w.rank(), step);
        for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
        buckets.finish();
        const auto mean = mean_grads(store.numel(), w.size(), step);
        double sq = 0.0;
        for (float g : mean) sq += static_cast<double>(g) * g;
        const double norm = dp_grad_norm(opt, w);
        CHECK(std::fabs(norm - std::sqrt(sq)) <= 1e-6 * std::sqrt(sq));
        opt.step(lr, scale);
        if (overlap) {
          CHECK(opt.pending_param_gathers() == static_cast<int>(buckets.buckets().size()));
          for (size_t p = 0; p < store.count(); ++p) opt.wait_param(p);
        }
        CHECK(opt.pending_param_gathers() == 0);
        ref.step(mean, step + 1, lr, scale, config);
        std::vector<float> expect(ref.store.flat_values().f32(), ref.store.flat_values().f32() + store.numel());
        // The mean gradient's rounding (dp terms g/dp summed in float, against one mean in double)
        // moves Adam's normalized update most where the mean nearly cancels: up to 3.3e-6 measured
        // over 4 ranks on the divisible shapes, under 1e-6 on the others.
        CHECK(max_rel_diff(store.flat_values().f32(), expect) <= 1e-5);
      }
      CHECK(opt.step_count() == 3);
    }
  }
}

// Data parallelism without the distributed optimizer: the buckets all-reduce and every rank steps
// the whole model (its own fp32 main parameters) on the same mean gradient.
TEST_CASE("whole-model optimizer on all-reduced gradients: 3 AdamW steps equal one-process AdamW") {
  auto& w = world();
  for (double size : kSizes) {
    CAPTURE(size);
    const OptimizerOptions config{0.9, 0.95, 1e-8, 0.5, false};
    Reference ref;
    ParameterStore store(specs(), host_context());
    store.initialize(1234);
    GradBuckets buckets(store, w, {size, true, false});
    Optimizer opt(store, config);
    REQUIRE(!opt.sharded());
    for (int step = 0; step < 3; ++step) {
      fill_grads(store, w.rank(), step);
      for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
      buckets.finish();
      const auto mean = mean_grads(store.numel(), w.size(), step);
      double sq = 0.0;
      for (float g : mean) sq += static_cast<double>(g) * g;
      CHECK(std::fabs(dp_grad_norm(opt, w) - std::sqrt(sq)) <= 1e-6 * std::sqrt(sq));
      opt.step(0.05, 1.0f);
      CHECK(opt.pending_param_gathers() == 0);
      ref.step(mean, step + 1, 0.05, 1.0f, config);
      std::vector<float> expect(ref.store.flat_values().f32(), ref.store.flat_values().f32() + store.numel());
      CHECK(max_rel_diff(store.flat_values().f32(), expect) <= 1e-6);
      CHECK(std::equal(store.flat_values().f32(), store.flat_values().f32() + store.numel(), opt.main_params().f32()));
    }
  }
}

// A replica (another rank holds the counted copy: the tied head on the last pipeline stage, a
// TP-duplicated norm gain on tp rank > 0) stays out of the gradient norm, wherever shards cut it.
TEST_CASE("distributed optimizer: the grad norm skips replica parameters", "[sharded]") {
  auto& w = world();
  for (double size : kSizes) {
    CAPTURE(size);
    std::vector<ParamSpec> sp = specs();
    sp[0].replica = true;  // embed.weight
    sp[3].replica = true;  // fc1.bias
    ParameterStore store(sp, host_context());
    store.initialize(1234);
    GradBuckets buckets(store, w, {size, true, true});
    Optimizer opt(buckets, OptimizerOptions{});
    fill_grads(store, w.rank(), 0);
    for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
    buckets.finish();
    const auto mean = mean_grads(store.numel(), w.size(), 0);
    double sq = 0.0;
    int64_t offset = 0;
    for (const ParamSpec& s : store.specs()) {
      const int64_t n = shape_numel(s.shape);
      if (!s.replica)
        for (int64_t i = offset; i < offset + n; ++i) sq += static_cast<double>(mean[i]) * mean[i];
      offset += n;
    }
    CHECK(std::fabs(dp_grad_norm(opt, w) - std::sqrt(sq)) <= 1e-6 * std::sqrt(sq));
  }
}

// What a checkpoint load does (trainer/training_checkpoint.cc, there from the files), from the whole
// model's flat state in memory: the state at state_ranges(), the rest zero, then the parameters
// from the main ones.
void load_flat_state(Optimizer& opt, const Tensor& main, const Tensor& m, const Tensor& v) {
  for (auto [mine, flat] : {std::pair{&opt.main_params(), &main}, {&opt.exp_avg(), &m}, {&opt.exp_avg_sq(), &v}}) {
    ops::fill(*mine, 0.0f);
    for (const Optimizer::StateRange& r : opt.state_ranges()) {
      Tensor dst = mine->slice_flat(mine == &opt.main_params() ? r.main_offset : r.state_offset, {r.numel});
      ops::copy(flat->slice_flat(r.flat_offset, {r.numel}), dst);
    }
  }
  opt.params_from_main();
}

// Checkpoints: gather_state gives every rank the one-process AdamW's flat-layout main parameters and
// moments; copy_state gives any rank's pieces of them (a save's boxes, on the host) without the whole
// state; a load of them into a fresh optimizer (of another bucket size: another shard layout)
// puts back exactly the shard the first one had and the model's values: both optimizers step to the
// same bits afterwards.
//
// Saves gather through a buffer of at most OptimizerOptions::state_gather_bytes: with 12 bytes (one
// element per rank at dp 2 and 4) every bucket is gathered in chunks, whose runs in the buffer are
// not the bucket's; the state and every piece must be the bits of the whole-bucket gathers.
TEST_CASE("distributed optimizer: state gathers to the flat layout and loads back into any shard layout", "[sharded]") {
  auto& w = world();
  std::map<double, FlatOptimizerState> whole_bucket_state;  // per bucket size, gathered a bucket at a time
  for (auto [size, gather_bytes] : {std::pair{kSizes[0], kStateGatherBytes}, {kSizes[1], kStateGatherBytes},
                                    {kSizes[2], kStateGatherBytes}, {kSizes[1], int64_t{12}},
                                    {kSizes[2], int64_t{12}}, {kSizes[2], int64_t{36}}}) {
    CAPTURE(size, gather_bytes);
    OptimizerOptions config{0.9, 0.95, 1e-8, 0.5, false};
    config.state_gather_bytes = gather_bytes;
    Reference ref;
    ParameterStore store(specs(), host_context());
    store.initialize(1234);
    GradBuckets buckets(store, w, {size, true, true});
    Optimizer opt(buckets, config);
    for (int step = 0; step < 2; ++step) {
      fill_grads(store, w.rank(), step);
      for (size_t p = store.count(); p-- > 0;) buckets.mark_ready(p);
      buckets.finish();
      opt.step(0.05, 1.0f);
      ref.step(mean_grads(store.numel(), w.size(), step), step + 1, 0.05, 1.0f, config);
    }
    const FlatOptimizerState state = opt.gather_state();
    const Tensor &m = state.exp_avg, &v = state.exp_avg_sq;
    if (gather_bytes == kStateGatherBytes) {
      whole_bucket_state[size] = state;
    } else {
      const FlatOptimizerState& want = whole_bucket_state.at(size);
      for (auto [got, expect] : {std::pair{&state.main_params, &want.main_params}, {&m, &want.exp_avg},
                                 {&v, &want.exp_avg_sq}})
        CHECK(std::equal(got->f32(), got->f32() + got->numel(), expect->f32()));
    }
    // Pieces as a save asks them: rank r takes every parameter i with i % size == r, each kind, and
    // the halves of its first parameter (pieces need not be whole parameters).
    std::vector<StatePiece> pieces;
    std::vector<std::pair<const Tensor*, int64_t>> expected;  // (flat state, offset) per piece
    for (size_t i = w.rank(); i < store.count(); i += w.size()) {
      const int64_t off = store.offset(i), n = store.offset(i + 1) - off;
      for (auto [kind, flat] : {std::pair{StateKind::kMainParams, &state.main_params},
                                {StateKind::kExpAvg, &state.exp_avg}, {StateKind::kExpAvgSq, &state.exp_avg_sq}}) {
        for (auto [lo, hi] : i == static_cast<size_t>(w.rank()) ? std::vector<std::pair<int64_t, int64_t>>{{0, n / 2}, {n / 2, n}}
                                                               : std::vector<std::pair<int64_t, int64_t>>{{0, n}}) {
          if (hi == lo) continue;
          pieces.push_back({kind, off + lo, Tensor::zeros({hi - lo})});
          expected.emplace_back(flat, off + lo);
        }
      }
    }
    opt.copy_state(pieces, /*moments=*/true).synchronize();
    for (size_t k = 0; k < pieces.size(); ++k) {
      const float* want = expected[k].first->f32() + expected[k].second;
      CHECK(std::equal(want, want + pieces[k].dst.numel(), pieces[k].dst.f32()));
    }
    if (buckets.buckets().size() > 1) {
      const int64_t edge = buckets.buckets()[0].begin;  // bucket 1 ends where bucket 0 begins
      CHECK_THROWS_WITH(opt.copy_state({{StateKind::kMainParams, edge - 1, Tensor::zeros({2})}}, false),
                        Catch::Contains("span two gradient buckets"));
    }
    CHECK(std::equal(store.flat_values().f32(), store.flat_values().f32() + store.numel(), state.main_params.f32()));
    for (size_t i = 0, flat = 0; i < store.count(); flat += ref.m[i].numel(), ++i) {
      std::vector<float> em(ref.m[i].f32(), ref.m[i].f32() + ref.m[i].numel());
      std::vector<float> ev(ref.v[i].f32(), ref.v[i].f32() + ref.v[i].numel());
      CHECK(max_rel_diff(m.f32() + flat, em) <= 1e-6);
      CHECK(max_rel_diff(v.f32() + flat, ev, 1e-6) <= 1e-6);
    }
    // Another shard layout (one bucket for everything) loads the same flat state.
    ParameterStore store2(specs(), host_context());
    GradBuckets buckets2(store2, w, {0.0, true, true});
    Optimizer opt2(buckets2, config);
    load_flat_state(opt2, state.main_params, m, v);
    opt2.set_step_count(opt.step_count());
    CHECK(std::equal(store.flat_values().f32(), store.flat_values().f32() + store.numel(), store2.flat_values().f32()));
    const FlatOptimizerState state2 = opt2.gather_state();
    const Tensor &m2 = state2.exp_avg, &v2 = state2.exp_avg_sq;
    CHECK(std::equal(m.f32(), m.f32() + m.numel(), m2.f32()));
    CHECK(std::equal(v.f32(), v.f32() + v.numel(), v2.f32()));
    CHECK(std::equal(state.main_params.f32(), state.main_params.f32() + store.numel(), state2.main_params.f32()));
    for (auto [s, b, o] : {std::tuple{&store, &buckets, &opt}, {&store2, &buckets2, &opt2}}) {
      fill_grads(*s, w.rank(), 2);
      for (size_t p = s->count(); p-- > 0;) b->mark_ready(p);
      b->finish();
      o->step(0.05, 1.0f);
    }
    CHECK(std::equal(store.flat_values().f32(), store.flat_values().f32() + store.numel(), store2.flat_values().f32()));
  }
}

TEST_CASE("distributed optimizer decays only decay parameters even where a shard cuts one", "[sharded]") {
  auto& w = world();
  // Zero gradients: Adam's update is 0, so only decay moves a parameter: p *= (1 - lr * wd).
  ParameterStore store(specs(), host_context());
  store.initialize(99);
  std::vector<float> before(store.flat_values().f32(), store.flat_values().f32() + store.numel());
  GradBuckets buckets(store, w, {0.0, false, true});
  Optimizer opt(buckets, {0.9, 0.95, 1e-8, 0.5, false});
  store.zero_grads();
  buckets.finish();
  opt.step(0.1, 1.0f);
  int64_t flat = 0;
  for (size_t i = 0; i < store.count(); ++i) {
    const float factor = store.spec(i).weight_decay ? 1.0f - 0.1f * 0.5f : 1.0f;
    for (int64_t k = 0; k < shape_numel(store.spec(i).shape); ++k, ++flat) {
      CHECK(store.flat_values().f32()[flat] == Approx(before[flat] * factor).epsilon(1e-6).margin(1e-12));
    }
  }
}

// bf16 parameters (Megatron's recipe): the trainer's exact fp32 initial values, off the bf16 grid.
Tensor exact_initial_values() {
  ParameterStore init(specs(), host_context());
  init.initialize(1234);
  return init.flat_values();
}

// The trainer's start-up (trainer/model_builder.cc's initial_values): each parameter's exact fp32
// initial values, one parameter at a time, from `flat` (the buffer's flat layout).
void set_initial_values(Optimizer& opt, const ParamGradBuffer& buffer, const Tensor& flat) {
  for (size_t p = 0; p < buffer.count(); ++p)
    opt.set_initial_value(p, flat.slice_flat(buffer.offset(p), buffer.spec(p).shape));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// This rank's main shard against a flat-layout tensor, element by element at its runs.
bool shard_equals(const Optimizer& opt, const Tensor& main_shard, const Tensor& flat) {
  for (const Optimizer::Run& run : opt.runs()) {
    if (std::memcmp(main_shard.f32() + run.shard_offset, flat.f32() + run.flat_offset, run.numel * sizeof(float)))
      return false;
  }
  return true;
}

// The distributed optimizer against the unsharded one on the same bf16 buffer layout and the same
// mean gradient (written into both directly, so that they differ in sharding only): its main shard
// starts at the exact initial values, its steps give the unsharded main parameters bit for bit, and
// its bf16 all-gathers (padded buckets through bf16 staging, overlapped or not) the unsharded bf16
// values, which are the rounding of the main parameters. The checkpoint state stays fp32 and loads
// into another shard layout.
TEST_CASE("distributed optimizer with bf16 parameters: fp32 main shards, bf16 gathers equal the unsharded optimizer", "[sharded]") {
  auto& w = world();
  const Tensor initial = exact_initial_values();
  int off_grid = 0;
  for (int64_t i = 0; i < initial.numel(); ++i) off_grid += initial.f32()[i] != round_bf16(initial.f32()[i]);
  REQUIRE(off_grid > initial.numel() / 2);
  for (double size : kSizes) {
    for (bool overlap : {false, true}) {
      CAPTURE(size, overlap);
      const OptimizerOptions config{0.9, 0.95, 1e-8, 0.5, overlap};
      ParamGradBuffer whole(specs(), DType::kBF16, host_context());
      Optimizer ref(whole, config);
      set_initial_values(ref, whole, initial);
      ParamGradBuffer buffer(specs(), DType::kBF16, host_context());
      GradBuckets buckets(buffer, w, {size, true, true});
      Optimizer opt(buckets, config);
      set_initial_values(opt, buffer, initial);
      CHECK(shard_equals(opt, opt.main_params(), initial));
      CHECK(same_bits(ref.main_params(), initial));
      for (int64_t i = 0; i < buffer.numel(); ++i)
        CHECK(buffer.flat_values().bf16()[i] == float_to_bfloat16(initial.f32()[i]));
      for (int step = 0; step < 3; ++step) {
        const auto mean = mean_grads(buffer.numel(), w.size(), step);
        std::copy(mean.begin(), mean.end(), whole.flat_grads().f32());
        for (size_t bi = 0; bi < buckets.buckets().size(); ++bi) {
          const GradBucket& b = buckets.buckets()[bi];
          for (int64_t k = 0; k < b.shard_numel; ++k) {
            const int64_t flat = b.begin + w.rank() * b.shard_numel + k;
            buckets.shard(bi).f32()[k] = flat < b.end ? mean[flat] : 0.0f;
          }
        }
        ref.step(0.05, 1.0f);
        opt.step(0.05, 1.0f);
        if (overlap) CHECK(opt.pending_param_gathers() == static_cast<int>(buckets.buckets().size()));
        opt.wait_all();
        CHECK(shard_equals(opt, opt.main_params(), ref.main_params()));
        CHECK(same_bits(buffer.flat_values(), whole.flat_values()));
        for (int64_t i = 0; i < buffer.numel(); ++i)
          CHECK(buffer.flat_values().bf16()[i] == float_to_bfloat16(ref.main_params().f32()[i]));
      }
      const FlatOptimizerState gathered = opt.gather_state();
      CHECK(same_bits(gathered.main_params, ref.main_params()));
      CHECK(same_bits(gathered.exp_avg, ref.exp_avg()));
      CHECK(same_bits(gathered.exp_avg_sq, ref.exp_avg_sq()));
      ParamGradBuffer buffer2(specs(), DType::kBF16, host_context());
      GradBuckets buckets2(buffer2, w, {0.0, true, true});
      Optimizer opt2(buckets2, config);
      load_flat_state(opt2, ref.main_params(), ref.exp_avg(), ref.exp_avg_sq());
      CHECK(shard_equals(opt2, opt2.main_params(), ref.main_params()));
      CHECK(same_bits(buffer2.flat_values(), whole.flat_values()));
    }
  }
}

// Master weights: AdamW steps of 1e-3 on parameters at 1.5, where bf16's spacing is 2^-7 (a step is
// a quarter of the half-spacing). Ten steps move the fp32 main shard to 1.49 and the bf16 values to
// its rounding, 1.4921875; without main parameters every step starts again from the rounded 1.5 and
// rounds back to it: the values never move.
TEST_CASE("distributed optimizer with bf16 parameters: updates below bf16 resolution accumulate in the main shard", "[sharded]") {
  auto& w = world();
  for (bool disable : {false, true}) {
    CAPTURE(disable);
    OptimizerOptions config{0.9, 0.95, 1e-8, 0.0, false};
    config.test_disable_main_params = disable;
    ParamGradBuffer buffer(specs(), DType::kBF16, host_context());
    GradBuckets buckets(buffer, w, {100.0 * 4 / (1024.0 * 1024.0), true, true});
    Tensor initial = Tensor::empty({buffer.numel()});
    ops::fill(initial, 1.5f);
    Optimizer opt(buckets, config);
    set_initial_values(opt, buffer, initial);
    for (size_t b = 0; b < buckets.buckets().size(); ++b) {
      Tensor shard = buckets.shard(b);
      ops::fill(shard, 1.0f);  // constant gradient: each Adam step is lr
    }
    for (int step = 0; step < 10; ++step) opt.step(1e-3, 1.0f);
    const float main_expect = disable ? 1.5f - 1e-3f : 1.5f - 1e-2f;
    for (const Optimizer::Run& run : opt.runs()) {
      for (int64_t k = 0; k < run.numel; ++k)
        CHECK(opt.main_params().f32()[run.shard_offset + k] == Approx(main_expect).margin(1e-5));
    }
    const uint16_t values_expect = disable ? 0x3fc0 : 0x3fbf;  // 1.5; 1.4921875
    for (int64_t i = 0; i < buffer.numel(); ++i) CHECK(buffer.flat_values().bf16()[i] == values_expect);
  }
}

// Whether two sharded optimizers of one layout hold the same main shard, bit for bit, wherever each
// keeps it (state_ranges()' main_offset).
bool same_main_shards(Optimizer& a, Optimizer& b) {
  const std::vector<Optimizer::StateRange> ra = a.state_ranges(), rb = b.state_ranges();
  REQUIRE(ra.size() == rb.size());
  bool same = true;
  for (size_t i = 0; i < ra.size(); ++i) {
    REQUIRE((ra[i].flat_offset == rb[i].flat_offset && ra[i].numel == rb[i].numel));
    same = same && same_bits(a.main_params().slice_flat(ra[i].main_offset, {ra[i].numel}),
                             b.main_params().slice_flat(rb[i].main_offset, {rb[i].numel}));
  }
  return same;
}

// In place or into a packed shard buffer, the same collectives on the same data: the same bits, in
// the gradient shards, the norm, the main shard and the parameters (f32 and bf16).
TEST_CASE("distributed optimizer: in-place buckets step to the bits of packed ones", "[sharded]") {
  auto& w = world();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (double size : kSizes) {
      CAPTURE(dtype_name(dtype), size);
      const OptimizerOptions config{0.9, 0.95, 1e-8, 0.5, true};
      ParamGradBuffer in_place_buffer(specs(), dtype, host_context()), packed_buffer(specs(), dtype, host_context());
      GradBuckets in_place(in_place_buffer, w, {size, true, true});
      GradBuckets packed(packed_buffer, w, {size, true, true, DType::kF32, /*allow_in_place=*/false});
      CHECK(in_place.in_place() == divisible_shapes());
      CHECK_FALSE(packed.in_place());
      const Tensor initial = exact_initial_values();
      Optimizer a(in_place, config), b(packed, config);
      // In place, fp32 parameters are their own main shard (no fp32 copy); packed they are not.
      CHECK((a.main_params().raw() == in_place_buffer.flat_values().raw()) ==
            (in_place.in_place() && dtype == DType::kF32));
      CHECK(b.main_params().raw() != packed_buffer.flat_values().raw());
      set_initial_values(a, in_place_buffer, initial);
      set_initial_values(b, packed_buffer, initial);
      for (int step = 0; step < 3; ++step) {
        for (auto [buffer, buckets] : {std::pair{&in_place_buffer, &in_place}, {&packed_buffer, &packed}}) {
          float* g = buffer->flat_grads().f32();
          for (int64_t i = 0; i < buffer->numel(); ++i) g[i] = grad_of(i, w.rank(), step);
          for (size_t p = buffer->count(); p-- > 0;) buckets->mark_ready(p);
          buckets->finish();
        }
        for (size_t bi = 0; bi < in_place.buckets().size(); ++bi) CHECK(same_bits(in_place.shard(bi), packed.shard(bi)));
        CHECK(dp_grad_norm(a, w) == dp_grad_norm(b, w));
        a.step(0.05, 1.0f);
        b.step(0.05, 1.0f);
        a.wait_all();
        b.wait_all();
        CHECK(same_main_shards(a, b));
        CHECK(same_bits(in_place_buffer.flat_values(), packed_buffer.flat_values()));
      }
    }
  }
}

}  // namespace
}  // namespace lattice
