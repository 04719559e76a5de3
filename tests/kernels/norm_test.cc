// LayerNorm (with and without beta) and RMSNorm: statistics, finite-difference gradients for
// x, gamma, beta, and accumulate semantics of dgamma/dbeta with many rows (the parallel path).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

TEST_CASE("layernorm without affine gives rows with mean 0 and variance 1") {
  const int64_t n = 64, h = 768;
  Tensor x = random_tensor({n, h}, 1, -3.0f, 5.0f);
  Tensor gamma = filled({h}, 1.0f);
  Tensor y = Tensor::empty({n, h}), mean = Tensor::empty({n}), rstd = Tensor::empty({n});
  ops::layernorm_forward(x, gamma, Tensor(), 1e-5f, y, mean, rstd);
  for (int64_t r = 0; r < n; r += 7) {
    double m = 0, v = 0, mx = 0;
    for (int64_t c = 0; c < h; ++c) {
      m += y.f32()[r * h + c];
      mx += x.f32()[r * h + c];
    }
    m /= h;
    mx /= h;
    for (int64_t c = 0; c < h; ++c) v += (y.f32()[r * h + c] - m) * (y.f32()[r * h + c] - m);
    v /= h;
    CHECK(std::abs(m) < 1e-5);
    CHECK(v == Approx(1.0).epsilon(1e-4));  // eps = 1e-5 vs variance ~5
    CHECK(mean.f32()[r] == Approx(mx).epsilon(1e-5));
  }
}

TEST_CASE("layernorm gradients by finite differences, with and without beta") {
  // 33 rows x 512 > the parallel threshold, so per-thread partial sums of dgamma/dbeta are used.
  const int64_t n = 33, h = 512;  // 16896 elements: above the 16384 parallel threshold
  for (bool with_beta : {true, false}) {
    CAPTURE(with_beta);
    Tensor x = random_tensor({n, h}, 1, -2.0f, 2.0f), gamma = random_tensor({h}, 2, 0.5f, 1.5f);
    Tensor beta = with_beta ? random_tensor({h}, 3) : Tensor();
    Tensor r = random_tensor({n, h}, 4);
    Tensor y = Tensor::empty({n, h}), mean = Tensor::empty({n}), rstd = Tensor::empty({n});
    auto loss = [&] {
      ops::layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
      return project(y, r);
    };
    loss();
    Tensor dx = filled({n, h}, 1e6f);  // overwritten
    Tensor dg0 = random_tensor({h}, 5), db0 = random_tensor({h}, 6);
    Tensor dg = clone(dg0), db = with_beta ? clone(db0) : Tensor();
    ops::layernorm_backward(r, x, gamma, mean, rstd, dx, dg, db);
    // 64 sampled entries per tensor keep the test fast on a loaded 2-core machine.
    CHECK_GRAD(grad_check(x, dx, loss, 1e-2, 64));
    CHECK_GRAD(grad_check(gamma, minus(dg, dg0), loss, 1e-2, 64));
    if (with_beta) CHECK_GRAD(grad_check(beta, minus(db, db0), loss, 1e-2, 64));
  }
}

TEST_CASE("rmsnorm forward and finite-difference gradients") {
  const int64_t n = 40, h = 384;
  Tensor x = random_tensor({n, h}, 1, -2.0f, 2.0f), gamma = random_tensor({h}, 2, 0.5f, 1.5f);
  Tensor r = random_tensor({n, h}, 4);
  Tensor y = Tensor::empty({n, h}), rstd = Tensor::empty({n});
  auto loss = [&] {
    ops::rmsnorm_forward(x, gamma, 1e-6f, y, rstd);
    return project(y, r);
  };
  loss();
  double ss = 0;
  for (int64_t c = 0; c < h; ++c) ss += static_cast<double>(x.f32()[c]) * x.f32()[c];
  const double rs = 1.0 / std::sqrt(ss / h + 1e-6);
  CHECK(rstd.f32()[0] == Approx(rs).epsilon(1e-5));
  CHECK(y.f32()[3] == Approx(x.f32()[3] * rs * gamma.f32()[3]).epsilon(1e-5));
  Tensor dx = filled({n, h}, 1e6f);
  Tensor dg0 = random_tensor({h}, 5);
  Tensor dg = clone(dg0);
  ops::rmsnorm_backward(r, x, gamma, rstd, dx, dg);
  CHECK_GRAD(grad_check(x, dx, loss, 1e-2, 64));
  CHECK_GRAD(grad_check(gamma, minus(dg, dg0), loss, 1e-2, 64));
}

TEST_CASE("norms reject mismatched parameter shapes") {
  Tensor x = random_tensor({4, 8}, 1), gamma = filled({7}, 1.0f);
  Tensor y = Tensor::empty({4, 8}), mean = Tensor::empty({4}), rstd = Tensor::empty({4});
  CHECK_THROWS_WITH(ops::layernorm_forward(x, gamma, Tensor(), 1e-5f, y, mean, rstd),
                    Catch::Contains("layernorm_forward") && Catch::Contains("gamma"));
  CHECK_THROWS_AS(ops::rmsnorm_forward(x, gamma, 1e-5f, y, rstd), Error);
}
