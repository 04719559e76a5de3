// ops::adamw_update against hand-computed AdamW steps (PyTorch AdamW semantics), and its checks.
#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

using namespace lattice;

namespace {

Tensor make(std::initializer_list<float> xs) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(xs.size())});
  int64_t i = 0;
  for (float x : xs) t.f32()[i++] = x;
  return t;
}

void set(Tensor& t, std::initializer_list<float> xs) {
  int64_t i = 0;
  for (float x : xs) t.f32()[i++] = x;
}

}  // namespace

TEST_CASE("adamw: two steps without weight decay match hand arithmetic") {
  // lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, no decay, grad_scale 1.
  Tensor p = make({1.0f, -2.0f, 0.5f});
  Tensor g = make({0.5f, -0.25f, 0.0f});
  Tensor m = Tensor::zeros({3});
  Tensor v = Tensor::zeros({3});
  ops::AdamWParams hp{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f, .step = 1,
                      .grad_scale = 1.0f};

  // The betas are floats (0.999f = 0.99900001), so 1 - beta2 differs from 0.001 by ~1e-5 relative:
  // v is checked to 1e-4 relative; the bias correction uses the same float beta, so updates are exact.
  // Step 1: m = 0.1 g, v = 0.001 g^2; bias corrections 1 - 0.9 = 0.1 and 1 - 0.999 = 0.001 give
  // m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) = lr * sign(g) (0 where g = 0).
  ops::adamw_update(p, g, m, v, hp);
  CHECK(m.f32()[0] == Approx(0.05).margin(1e-7));      // 0.1 * 0.5
  CHECK(m.f32()[1] == Approx(-0.025).margin(1e-7));    // 0.1 * -0.25
  CHECK(m.f32()[2] == 0.0f);
  CHECK(v.f32()[0] == Approx(0.00025).epsilon(1e-4));   // 0.001 * 0.25
  CHECK(v.f32()[1] == Approx(0.0000625).epsilon(1e-4)); // 0.001 * 0.0625
  CHECK(v.f32()[2] == 0.0f);
  CHECK(p.f32()[0] == Approx(0.9).margin(1e-6));   // 1 - 0.1
  CHECK(p.f32()[1] == Approx(-1.9).margin(1e-6));  // -2 + 0.1
  CHECK(p.f32()[2] == 0.5f);                       // g = 0: m_hat = 0, no move

  // Step 2, grads 0.5 (same), +0.25 (sign flip), 1.0 (first nonzero). bc1 = 1 - 0.81 = 0.19,
  // bc2 = 1 - 0.998001 = 0.001999.
  set(g, {0.5f, 0.25f, 1.0f});
  hp.step = 2;
  ops::adamw_update(p, g, m, v, hp);
  // [0]: m = 0.9*0.05 + 0.1*0.5 = 0.095, m_hat = 0.095/0.19 = 0.5;
  //      v = 0.999*0.00025 + 0.001*0.25 = 0.00049975, v_hat = 0.00049975/0.001999 = 0.25, sqrt = 0.5;
  //      p = 0.9 - 0.1 * 0.5/0.5 = 0.8.
  CHECK(m.f32()[0] == Approx(0.095).margin(1e-7));
  CHECK(v.f32()[0] == Approx(0.00049975).epsilon(1e-4));
  CHECK(p.f32()[0] == Approx(0.8).margin(1e-6));
  // [1]: m = 0.9*-0.025 + 0.1*0.25 = 0.0025, m_hat = 0.0025/0.19 = 0.01315789...;
  //      v = 0.999*0.0000625 + 0.001*0.0625 = 0.0001249375, v_hat = 0.0625, sqrt = 0.25;
  //      p = -1.9 - 0.1 * 0.01315789/0.25 = -1.9 - 0.00526316 = -1.90526316.
  CHECK(m.f32()[1] == Approx(0.0025).margin(1e-7));
  CHECK(p.f32()[1] == Approx(-1.90526316).margin(1e-6));
  // [2]: m = 0.1, m_hat = 0.1/0.19 = 0.52631579; v = 0.001, v_hat = 0.001/0.001999, so
  //      1/sqrt(v_hat) = sqrt(1.999) = 1.41386;  p = 0.5 - 0.1 * 0.52631579 * 1.41386 = 0.5 - 0.0744137
  //      = 0.4255863.
  CHECK(p.f32()[2] == Approx(0.4255863).margin(1e-6));
}

TEST_CASE("adamw: grad_scale first, decoupled weight decay on the pre-update parameter") {
  // lr 0.01, wd 0.1, grad_scale 0.5, betas 0.9 / 0.999.
  Tensor p = make({2.0f});
  Tensor g = make({4.0f});
  Tensor m = Tensor::zeros({1});
  Tensor v = Tensor::zeros({1});
  ops::AdamWParams hp{.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1,
                      .grad_scale = 0.5f};
  // Step 1: scaled g = 4 * 0.5 = 2; m = 0.1*2 = 0.2; v = 0.001*4 = 0.004; Adam update = lr * sign(g) = 0.01.
  // Decay: 2 * (1 - 0.01*0.1) = 2 * 0.999 = 1.998; p = 1.998 - 0.01 = 1.988.
  ops::adamw_update(p, g, m, v, hp);
  CHECK(m.f32()[0] == Approx(0.2).margin(1e-7));
  CHECK(v.f32()[0] == Approx(0.004).epsilon(1e-4));
  CHECK(p.f32()[0] == Approx(1.988).margin(1e-6));

  // Step 2: g = -4, scaled -2. m = 0.9*0.2 + 0.1*-2 = -0.02; v = 0.999*0.004 + 0.001*4 = 0.007996.
  // m_hat = -0.02/0.19 = -0.10526316; v_hat = 0.007996/0.001999 = 4, sqrt = 2.
  // p = 1.988*0.999 - 0.01 * (-0.10526316/2) = 1.986012 + 0.00052632 = 1.98653832.
  set(g, {-4.0f});
  hp.step = 2;
  ops::adamw_update(p, g, m, v, hp);
  CHECK(m.f32()[0] == Approx(-0.02).margin(1e-7));
  CHECK(v.f32()[0] == Approx(0.007996).epsilon(1e-4));
  CHECK(p.f32()[0] == Approx(1.98653832).margin(1e-6));
}

TEST_CASE("adamw: a large buffer updates every element (parallel path)") {
  // 200k elements > the OpenMP threshold; all with g = 1, p = 1: step 1 gives p = 1 - lr.
  const int64_t n = 200000;
  Tensor p = Tensor::zeros({n});
  Tensor g = Tensor::zeros({n});
  for (int64_t i = 0; i < n; ++i) p.f32()[i] = 1.0f, g.f32()[i] = (i % 2 == 0) ? 1.0f : -1.0f;
  Tensor m = Tensor::zeros({n});
  Tensor v = Tensor::zeros({n});
  ops::AdamWParams hp{.lr = 0.125f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f, .step = 1,
                      .grad_scale = 1.0f};
  ops::adamw_update(p, g, m, v, hp);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = (i % 2 == 0) ? 0.875f : 1.125f;  // 1 -/+ 0.125
    if (std::abs(p.f32()[i] - want) > 1e-6f) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("adamw: mismatched sizes, dtypes and step 0 are errors naming the shapes") {
  Tensor p = Tensor::zeros({4});
  Tensor g = Tensor::zeros({3});
  Tensor m = Tensor::zeros({4});
  Tensor v = Tensor::zeros({4});
  ops::AdamWParams hp{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f, .step = 1,
                      .grad_scale = 1.0f};
  REQUIRE_THROWS_WITH(ops::adamw_update(p, g, m, v, hp), Catch::Contains("f32[3] cpu"));
  Tensor gi = Tensor::zeros({4}, DType::kI32);
  REQUIRE_THROWS_AS(ops::adamw_update(p, gi, m, v, hp), Error);
  Tensor g4 = Tensor::zeros({4});
  hp.step = 0;
  REQUIRE_THROWS_AS(ops::adamw_update(p, g4, m, v, hp), Error);
}
