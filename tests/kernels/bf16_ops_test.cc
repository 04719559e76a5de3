// bf16 operands of every op that takes them (kernels/ops.h, staged by kernels/f32_staging.h), on the
// CPU. Each bf16 run of the backend harness's cases (tests/kernels/backend_harness.h: the arguments it
// lists are make's f32 draw rounded to bf16, the others keep their dtype, so runs mix dtypes, alias
// operands and work in place as the cases do) is checked two ways:
//  - the contract, bit for bit (the harness's compare_bf16_contract): against the f32 op run on the
//    same values widened to f32 (exact), its results rounded to nearest even where the bf16 run's
//    argument is bf16;
//  - a bound, against the f32 op on the unrounded draw. Rounding an input x_j to bf16 (8 significant
//    bits, round to nearest) moves it by at most u |x_j|, u = 2^-8, so to first order an output y
//    moves by at most S_y = sum_j |dy/dx_j| u |x_j| over the rounded inputs; S_y is measured per
//    output element by moving each rounded input element alone by u |x_j| through the f32 op. A
//    bf16 output adds its own rounding, u |y|. Allowed: twice that (second-order terms, and S_y
//    measured on one side only), plus 1e-6 (1 + |y|) for the f32 kernels' own rounding.
//    An output that is not written back, an accumulation that overwrites or an aliased input left
//    unwidened is off by the output's or the accumulator's whole value, far outside the bound.
// Plus the dtype errors, and that the staging's scratch is reused from step to step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;
using test::element;
using test::OpCase;
using test::Tensors;

namespace {

constexpr double kU = 1.0 / 256;  // bf16's relative rounding error bound, 2^-8

// The ops with no bf16 operand to stage: copy and cast take any dtype; the rest are f32 by contract.
const std::vector<std::string> kNoBf16 = {"copy", "cast", "cross_entropy_shard_loss", "adamw_update", "fill_normal"};

struct Result {
  Tensors tensors;  // every argument after the call
  std::vector<double> scalars;
};

// The case run on host copies of `args`.
Result run(const OpCase& c, const Tensors& args) {
  Result r{test::with_bf16(args, {}), {}};
  r.scalars = c.run(r.tensors);
  return r;
}

bool floating(const Tensor& t) { return t.dtype() != DType::kI32; }

// S_y (see the top) for every element of every argument and for every scalar of `draw`'s f32 run.
struct Sensitivity {
  std::vector<std::vector<double>> tensors;
  std::vector<double> scalars;
};

Sensitivity sensitivity(const OpCase& c, const Tensors& draw, const std::vector<int>& bf16_args, const Result& base) {
  Sensitivity s;
  for (const Tensor& t : base.tensors) s.tensors.emplace_back(static_cast<size_t>(t.numel()), 0.0);
  s.scalars.assign(base.scalars.size(), 0.0);
  for (const int a : bf16_args) {
    for (int64_t j = 0; j < draw[a].numel(); ++j) {
      Tensors moved = test::with_bf16(draw, {});
      float& x = moved[a].f32()[j];
      x += static_cast<float>(kU * std::abs(x));
      const Result r = run(c, moved);
      for (size_t k = 0; k < r.tensors.size(); ++k) {
        if (!floating(r.tensors[k])) continue;
        for (int64_t e = 0; e < r.tensors[k].numel(); ++e) {
          s.tensors[k][e] += std::abs(element(r.tensors[k], e) - element(base.tensors[k], e));
        }
      }
      for (size_t k = 0; k < r.scalars.size(); ++k) s.scalars[k] += std::abs(r.scalars[k] - base.scalars[k]);
    }
  }
  return s;
}

double allowed(double sensitivity, double want, bool rounded) {
  return 2.0 * (sensitivity + (rounded ? kU * std::abs(want) : 0.0)) + 1e-6 * (1.0 + std::abs(want));
}

}  // namespace

TEST_CASE("every op that takes bf16 has bf16 runs in the harness") {
  std::vector<std::string> with_bf16;
  for (const OpCase& c : test::op_cases()) {
    if (!c.bf16.empty()) with_bf16.push_back(c.op);
  }
  auto contains = [](const std::vector<std::string>& v, const std::string& op) {
    return std::find(v.begin(), v.end(), op) != v.end();
  };
  for (const std::string& op : test::harness_op_names()) {
    INFO(op);
    CHECK(contains(with_bf16, op) == !contains(kNoBf16, op));
  }
}

TEST_CASE("bf16 operands: the f32 op on the widened values, rounded back, bit for bit") {
  // matmul_bias is two staged kernels in a row on the CPU, each rounding its bf16 output (matmul,
  // then add_bias): each kernel meets the contract, the op as a whole rounds twice. So do the GELU
  // MLP's ops (matmul_bias then gelu_forward; matmul then gelu_backward), and matmul_group, which is
  // matmul_bias for each product. The bound below still holds for them.
  const std::vector<test::OpMismatch> found = test::compare_bf16_contract(
      Device::kCpu, {"matmul_bias", "matmul_bias_gelu", "matmul_gelu_backward", "matmul_group"}, 1000);
  for (const test::OpMismatch& m : found) FAIL_CHECK(m.op << ": " << m.detail);
  CHECK(found.empty());
}

TEST_CASE("bf16 operands: within bf16's bound of the f32 op on the unrounded values") {
  uint64_t seed = 1000;
  for (const OpCase& c : test::op_cases()) {
    for (const std::vector<int>& bf16_args : c.bf16) {
      INFO(test::case_name(c, bf16_args));
      test::Inputs in(seed++);
      const Tensors draw = c.make(in);
      const Tensors bf16_draw = test::with_bf16(draw, bf16_args);
      const Result got = run(c, bf16_draw);
      const Result f32 = run(c, draw);
      const Sensitivity s = sensitivity(c, draw, bf16_args, f32);
      for (size_t k = 0; k < got.scalars.size(); ++k) {
        INFO("result " << k << ": " << got.scalars[k] << " vs f32 " << f32.scalars[k]);
        CHECK(std::abs(got.scalars[k] - f32.scalars[k]) <= allowed(s.scalars[k], f32.scalars[k], false));
      }
      for (size_t k = 0; k < got.tensors.size(); ++k) {
        const Tensor& t = got.tensors[k];
        if (!floating(t) || t.numel() == 0) continue;
        const bool rounded = t.dtype() == DType::kBF16;
        int64_t worst = 0;
        double worst_ratio = 0;
        for (int64_t e = 0; e < t.numel(); ++e) {
          const double want = element(f32.tensors[k], e);
          const double ratio = std::abs(element(t, e) - want) / allowed(s.tensors[k][e], want, rounded);
          if (ratio > worst_ratio) worst = e, worst_ratio = ratio;
        }
        INFO("argument " << k << " " << t.describe() << " element " << worst << ": " << element(t, worst) << " vs f32 "
                         << element(f32.tensors[k], worst) << ", " << worst_ratio << " of the bound");
        CHECK(worst_ratio <= 1.0);
      }
    }
  }
}

TEST_CASE("a data operand of another dtype is an error naming the op, the operand and the dtypes allowed") {
  Tensor i32 = Tensor::zeros({4, 8}, DType::kI32), f64 = Tensor::zeros({4, 8}, DType::kF64);
  Tensor x = Tensor::zeros({4, 8}), w = Tensor::zeros({8, 8}), h = Tensor::zeros({8});
  Tensor ids = Tensor::zeros({4}, DType::kI32), rows = Tensor::zeros({4});
  Tensor q = Tensor::zeros({1, 4, 2, 4}), lse = Tensor::zeros({1, 2, 4});
  Tensor bad_q = Tensor::zeros({1, 4, 2, 4}, DType::kI32);
  auto names = [](const char* op, const char* operand, const Tensor& t) {
    return Catch::Contains(fmt::format("{}: `{}` must be f32 or bf16, got {}", op, operand, t.describe()));
  };
  REQUIRE_THROWS_WITH(ops::matmul(i32, false, w, false, x), names("matmul", "a", i32));
  REQUIRE_THROWS_WITH(ops::add(x, x, f64), names("add", "out", f64));
  REQUIRE_THROWS_WITH(ops::fill(f64, 1.0f), names("fill", "x", f64));
  REQUIRE_THROWS_WITH(ops::sum_squares(i32), names("sum_squares", "x", i32));
  REQUIRE_THROWS_WITH(ops::gelu_backward(x, x, i32), names("gelu_backward", "dx", i32));
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, ids, h, 1e-5f, x, rows, rows),
                      names("layernorm_forward", "gamma", ids));
  REQUIRE_THROWS_WITH(ops::attention_forward(bad_q, q, q, q, lse), names("attention_forward", "q", bad_q));
  REQUIRE_THROWS_WITH(ops::embedding_forward(ids, i32, x), names("embedding_forward", "table", i32));
  REQUIRE_THROWS_WITH(ops::rope_forward(bad_q, 10000.0f), names("rope_forward", "x", bad_q));
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward(x, ids, rows, 1.0f, i32),
                      names("cross_entropy_backward", "dlogits", i32));
}

TEST_CASE("statistics, the optimizer and initialization stay f32: a bf16 one is an error naming it") {
  const DType bf = DType::kBF16;
  Tensor x = Tensor::zeros({4, 8}), h = Tensor::zeros({8}), rows = Tensor::zeros({4}), rows16 = Tensor::zeros({4}, bf);
  Tensor ids = Tensor::zeros({4}, DType::kI32), sums = Tensor::zeros({2, 4}), sums16 = Tensor::zeros({2, 4}, bf);
  Tensor q = Tensor::zeros({1, 4, 2, 4}), lse = Tensor::zeros({1, 2, 4}), lse16 = Tensor::zeros({1, 2, 4}, bf);
  Tensor x16 = Tensor::zeros({4, 8}, bf);
  auto names = [](const char* op, const char* operand, const Tensor& t) {
    return Catch::Contains(fmt::format("{}: `{}` must be f32, got {}", op, operand, t.describe()));
  };
  REQUIRE_THROWS_WITH(ops::layernorm_forward(x, h, h, 1e-5f, x, rows16, rows),
                      names("layernorm_forward", "mean", rows16));
  REQUIRE_THROWS_WITH(ops::layernorm_backward(x, x, h, rows, rows16, x, h, h),
                      names("layernorm_backward", "rstd", rows16));
  REQUIRE_THROWS_WITH(ops::rmsnorm_forward(x, h, 1e-5f, x, rows16), names("rmsnorm_forward", "rstd", rows16));
  REQUIRE_THROWS_WITH(ops::rmsnorm_backward(x, x, h, rows16, x, h), names("rmsnorm_backward", "rstd", rows16));
  REQUIRE_THROWS_WITH(ops::attention_forward(q, q, q, q, lse16), names("attention_forward", "lse", lse16));
  REQUIRE_THROWS_WITH(ops::attention_backward(q, q, q, q, q, lse16, q, q, q),
                      names("attention_backward", "lse", lse16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(x, ids, rows16, rows),
                      names("cross_entropy_forward", "losses", rows16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_forward(x, ids, rows, rows16), names("cross_entropy_forward", "lse", rows16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_backward(x, ids, rows16, 1.0f, x),
                      names("cross_entropy_backward", "lse", rows16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_shard_max(x, 8, rows16), names("cross_entropy_shard_max", "row_max", rows16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_shard_sums(x, ids, rows, 0, 8, 8, sums16),
                      names("cross_entropy_shard_sums", "sums", sums16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_shard_loss(rows16, sums, rows, rows),
                      names("cross_entropy_shard_loss", "row_max", rows16));
  REQUIRE_THROWS_WITH(ops::cross_entropy_shard_backward(x, ids, rows16, 1.0f, 0, 8, 8, x),
                      names("cross_entropy_shard_backward", "lse", rows16));
  REQUIRE_THROWS_WITH(ops::fill_normal(x16, {4, 8}, {0, 0}, 1, 2, 1.0f), names("fill_normal", "x", x16));
  REQUIRE_THROWS_WITH(ops::sum_to(x, rows16, 0),
                      Catch::Contains(fmt::format("sum_to: `out` must be f64, got {}", rows16.describe())));
  const ops::AdamWParams p{
      .lr = 1, .beta1 = 0.9f, .beta2 = 0.9f, .eps = 1, .weight_decay = 0, .step = 1, .grad_scale = 1};
  REQUIRE_THROWS_WITH(ops::adamw_update(x, x16, x, x, p),
                      Catch::Contains("adamw_update: expected f32 tensors") && Catch::Contains(x16.describe()));
}

namespace {

int g_allocations = 0;

std::shared_ptr<Storage> counting_allocate(size_t bytes) {
  ++g_allocations;
  return test::cuda_stand_in().allocate(bytes);
}

}  // namespace

TEST_CASE("the staging's scratch is allocated in the first step and reused by every later one") {
  Backend counting = test::cuda_stand_in();
  counting.allocate = &counting_allocate;
  test::ScopedBackend registered(Device::kCuda, &counting);
  const DeviceContext ctx(Device::kCuda);
  constexpr int64_t N = 32, H = 16, F = 48, V = 40;
  const DType bf = DType::kBF16;
  // A small bf16 step over tensors allocated up front, as the model's arenas are.
  Tensor x = ctx.zeros({N, H}, bf), gamma = ctx.zeros({H}, bf), beta = ctx.zeros({H}, bf), y = ctx.zeros({N, H}, bf);
  Tensor mean = ctx.zeros({N}), rstd = ctx.zeros({N}), w = ctx.zeros({F, H}, bf), hidden = ctx.zeros({N, F}, bf);
  Tensor act = ctx.zeros({N, F}, bf), head = ctx.zeros({V, F}, bf), logits = ctx.zeros({N, V}, bf);
  Tensor targets = ctx.zeros({N}, DType::kI32), losses = ctx.zeros({N}), lse = ctx.zeros({N});
  Tensor dhead = ctx.zeros({V, F});  // an f32 gradient accumulator
  for (Tensor* t : {&x, &gamma, &w, &head}) ops::fill(*t, 0.5f);
  auto step = [&] {
    ops::layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
    ops::matmul(y, false, w, true, hidden);
    ops::gelu_forward(hidden, act);
    ops::matmul(act, false, head, true, logits);
    ops::cross_entropy_forward(logits, targets, losses, lse);
    ops::cross_entropy_backward(logits, targets, lse, 1.0f / N, logits);
    ops::matmul(logits, true, act, false, dhead, 1.0f, 1.0f);
  };
  const int before = g_allocations;
  step();
  const int first_step = g_allocations - before;
  for (int i = 0; i < 3; ++i) step();
  CHECK(first_step > 0);
  CHECK(first_step <= 8);  // the pool's buffers (kernels/f32_staging.h: kMaxStaged)
  REQUIRE(g_allocations == before + first_step);
}
