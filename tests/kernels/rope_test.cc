// RoPE (Hugging Face rotate-half): identity at t = 0, values against a double reference,
// rope_backward is the adjoint (<rope(x), y> == <x, rope_backward(y)>), and finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {
constexpr float kTheta = 10000.0f;
}

TEST_CASE("rope is the identity at t = 0 and matches a double-precision reference") {
  const int64_t b = 2, t = 9, heads = 3, d = 16;
  // Same shape, two thetas: the cached cos/sin table must follow theta.
  for (float theta : {kTheta, 500000.0f}) {
    CAPTURE(theta);
    Tensor x0 = random_tensor({b, t, heads, d}, 1);
    Tensor x = clone(x0);
    ops::rope_forward(x, theta);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t ti = 0; ti < t; ++ti)
        for (int64_t h = 0; h < heads; ++h) {
          const float* in = x0.f32() + ((bi * t + ti) * heads + h) * d;
          const float* out = x.f32() + ((bi * t + ti) * heads + h) * d;
          for (int64_t i = 0; i < d; ++i) {
            const int64_t j = i % (d / 2);
            const double ang = ti * std::pow(static_cast<double>(theta), -2.0 * j / d);
            const double rot = i < d / 2 ? -in[i + d / 2] : in[i - d / 2];  // rotate_half
            const double ref = in[i] * std::cos(ang) + rot * std::sin(ang);
            if (ti == 0) REQUIRE(out[i] == in[i]);
            REQUIRE(out[i] == Approx(ref).margin(1e-6));
          }
        }
  }
}

TEST_CASE("rope_backward is the adjoint (and inverse) of rope_forward") {
  const int64_t b = 2, t = 13, heads = 4, d = 32;
  Tensor x = random_tensor({b, t, heads, d}, 1), y = random_tensor({b, t, heads, d}, 2);
  Tensor rx = clone(x), ry = clone(y);
  ops::rope_forward(rx, kTheta);
  ops::rope_backward(ry, kTheta);
  const double lhs = project(rx, y), rhs = project(x, ry);
  CHECK(lhs == Approx(rhs).epsilon(1e-6));
  ops::rope_backward(rx, kTheta);  // rotation: the adjoint is also the inverse
  CHECK(max_abs_diff(rx, x) < 1e-5);
}

TEST_CASE("rope gradient by finite differences") {
  const int64_t b = 1, t = 6, heads = 2, d = 8;
  Tensor x = random_tensor({b, t, heads, d}, 3), r = random_tensor({b, t, heads, d}, 4);
  Tensor y = Tensor::empty({b, t, heads, d});
  auto loss = [&] {
    ops::copy(x, y);
    ops::rope_forward(y, kTheta);
    return project(y, r);
  };
  Tensor g = clone(r);
  ops::rope_backward(g, kTheta);
  CHECK_GRAD(grad_check(x, g, loss));
  Tensor odd = random_tensor({1, 2, 1, 7}, 5);
  CHECK_THROWS_AS(ops::rope_forward(odd, kTheta), Error);
}
