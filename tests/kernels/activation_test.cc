// GELU (tanh approximation, GPT-2) and SwiGLU: values against double-precision formulas and
// finite-difference gradients.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

TEST_CASE("gelu matches GPT-2's tanh formula, including the tails") {
  Tensor x = Tensor::empty({2001});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = -20.0f + 0.02f * i;
  Tensor y = Tensor::empty({2001});
  ops::gelu_forward(x, y);
  double max_err = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.f32()[i];
    const double ref = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    max_err = std::max(max_err, std::abs(y.f32()[i] - ref) / std::max(1.0, std::abs(ref)));
  }
  CHECK(max_err < 1e-6);
}

TEST_CASE("gelu and swiglu gradients by finite differences") {
  const int64_t n = 150;
  Tensor x = random_tensor({n}, 1, -4.0f, 4.0f), r = random_tensor({n}, 2);
  Tensor y = Tensor::empty({n});
  auto gelu_loss = [&] {
    ops::gelu_forward(x, y);
    return project(y, r);
  };
  Tensor dx = filled({n}, 1e6f);
  ops::gelu_backward(r, x, dx);
  CHECK_GRAD(grad_check(x, dx, gelu_loss, 1e-2));

  Tensor gate = random_tensor({10, 15}, 3, -5.0f, 5.0f), up = random_tensor({10, 15}, 4, -2.0f, 2.0f);
  Tensor r2 = random_tensor({10, 15}, 5), y2 = Tensor::empty({10, 15});
  auto swiglu_loss = [&] {
    ops::swiglu_forward(gate, up, y2);
    return project(y2, r2);
  };
  swiglu_loss();
  const double g = gate.f32()[7], u = up.f32()[7];
  CHECK(y2.f32()[7] == Approx(g / (1.0 + std::exp(-g)) * u).epsilon(1e-6));
  Tensor dgate = filled({10, 15}, 1e6f), dup = filled({10, 15}, 1e6f);
  ops::swiglu_backward(r2, gate, up, dgate, dup);
  CHECK_GRAD(grad_check(gate, dgate, swiglu_loss));
  CHECK_GRAD(grad_check(up, dup, swiglu_loss));
}

TEST_CASE("gelu on a large tensor uses the parallel path consistently") {
  Tensor x = random_tensor({1 << 17}, 9, -6.0f, 6.0f), y = Tensor::empty({1 << 17});
  ops::gelu_forward(x, y);
  for (int64_t i = 0; i < x.numel(); i += 4099) {
    const double v = x.f32()[i];
    const double ref = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    CHECK(y.f32()[i] == Approx(ref).epsilon(1e-5).margin(1e-7));
  }
}
