// Elementwise ops, sum_squares and the slot sums, bias add/backward (finite differences + accumulate
// semantics), and a self-test showing the gradient checker rejects a wrong sign or a factor 2.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

TEST_CASE("fill, copy, scale, axpy, add") {
  Tensor x = Tensor::empty({100003});  // above the parallel threshold, odd length
  ops::fill(x, 2.5f);
  for (int64_t i = 0; i < x.numel(); ++i) REQUIRE(x.f32()[i] == 2.5f);
  Tensor y = random_tensor({100003}, 1);
  Tensor y0 = clone(y);
  ops::axpy(-2.0f, x, y);
  for (int64_t i = 0; i < y.numel(); i += 977) CHECK(y.f32()[i] == Approx(y0.f32()[i] - 5.0f));
  ops::scale(y, 3.0f);
  CHECK(y.f32()[5] == Approx(3.0f * (y0.f32()[5] - 5.0f)));
  Tensor z = Tensor::empty({100003});
  ops::add(x, y0, z);
  CHECK(z.f32()[17] == Approx(2.5f + y0.f32()[17]));
  ops::add(z, z, z);  // out aliases both inputs
  CHECK(z.f32()[17] == Approx(2.0f * (2.5f + y0.f32()[17])));
  Tensor w = Tensor::empty({7});
  CHECK_THROWS_AS(ops::copy(x, w), Error);
  CHECK_THROWS_AS(ops::axpy(1.0f, x, w), Error);
}

TEST_CASE("sum_squares is accurate in double") {
  Tensor x = random_tensor({300001}, 2);
  double ref = 0;
  for (int64_t i = 0; i < x.numel(); ++i) ref += static_cast<double>(x.f32()[i]) * x.f32()[i];
  CHECK(ops::sum_squares(x) == Approx(ref).epsilon(1e-6));
}

TEST_CASE("sum_to and sum_squares_to: the bits of a serial double sum and of sum_squares, in their slot") {
  Tensor x = random_tensor({300001}, 3);
  double serial = 0;
  for (int64_t i = 0; i < x.numel(); ++i) serial += x.f32()[i];
  Tensor out = Tensor::zeros({3}, DType::kF64);
  ops::sum_to(x, out, 2);
  ops::sum_squares_to(x, out, 0);
  CHECK(out.f64()[2] == serial);
  CHECK(out.f64()[0] == ops::sum_squares(x));
  CHECK(out.f64()[1] == 0.0);
  CHECK_THROWS_AS(ops::sum_to(x, out, 3), Error);
  Tensor f32_out = Tensor::zeros({3});
  CHECK_THROWS_AS(ops::sum_squares_to(x, f32_out, 0), Error);
}

TEST_CASE("add_bias and bias_backward: finite differences and accumulation") {
  const int64_t n = 9, f = 300;  // f above the 256-column block of bias_backward
  Tensor y0 = random_tensor({3, 3, f}, 1), bias = random_tensor({f}, 2), r = random_tensor({3, 3, f}, 3);
  Tensor y = Tensor::empty({3, 3, f});
  auto loss = [&] {
    ops::copy(y0, y);
    ops::add_bias(y, bias);
    return project(y, r);
  };
  loss();
  CHECK(y.f32()[f + 5] == Approx(y0.f32()[f + 5] + bias.f32()[5]));
  Tensor db0 = random_tensor({f}, 4);
  Tensor db = clone(db0);
  ops::bias_backward(r, db);  // accumulates column sums of dy = r
  CHECK_GRAD(grad_check(bias, minus(db, db0), loss, 1e-2, 400));
  double col7 = 0;
  for (int64_t i = 0; i < n; ++i) col7 += r.f32()[i * f + 7];
  CHECK(db.f32()[7] == Approx(db0.f32()[7] + col7).epsilon(1e-5));
  Tensor bad = Tensor::empty({f + 1});
  CHECK_THROWS_AS(ops::add_bias(y, bad), Error);
}

TEST_CASE("the gradient checker rejects a wrong sign or a factor of 2") {
  Tensor a = random_tensor({5, 4}, 21), b = random_tensor({4, 3}, 22), r = random_tensor({5, 3}, 23);
  Tensor c = Tensor::empty({5, 3});
  auto loss = [&] {
    ops::matmul(a, false, b, false, c);
    return project(c, r);
  };
  Tensor da = Tensor::empty({5, 4});
  ops::matmul(r, false, b, true, da);  // correct: R b^T
  CHECK(grad_check(a, da, loss).ok());
  Tensor twice = clone(da);
  ops::scale(twice, 2.0f);
  CHECK_FALSE(grad_check(a, twice, loss).ok());
  Tensor negated = clone(da);
  ops::scale(negated, -1.0f);
  CHECK_FALSE(grad_check(a, negated, loss).ok());
  Tensor one_wrong = clone(da);
  one_wrong.f32()[6] *= 2.0f;
  CHECK_FALSE(grad_check(a, one_wrong, loss).ok());
}
