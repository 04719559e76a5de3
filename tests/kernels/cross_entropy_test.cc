// Softmax cross-entropy: uniform logits give ln V, values against double, gradient by finite
// differences (with grad_scale), in-place backward, stability at large logits, target validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {
Tensor targets_tensor(std::vector<int32_t> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::kI32);
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i];
  return t;
}
}  // namespace

TEST_CASE("cross-entropy of uniform logits is ln V") {
  const int64_t vocab = 50304;
  Tensor logits = filled({4, vocab}, 3.25f);
  Tensor targets = targets_tensor({0, 17, 50303, 999});
  Tensor losses = Tensor::empty({4}), lse = Tensor::empty({4});
  ops::cross_entropy_forward(logits, targets, losses, lse);
  for (int r = 0; r < 4; ++r) CHECK(losses.f32()[r] == Approx(std::log(static_cast<double>(vocab))).epsilon(1e-5));
}

TEST_CASE("cross-entropy values, stability, and finite-difference gradient") {
  const int64_t n = 6, vocab = 37;
  Tensor logits = random_tensor({2, 3, vocab}, 1, -3.0f, 3.0f);
  logits.f32()[5] = 1000.0f;  // stability: a huge logit must not overflow
  Tensor targets = targets_tensor({0, 5, 36, 12, 12, 1});
  Tensor losses = Tensor::empty({n}), lse = Tensor::empty({n});
  ops::cross_entropy_forward(logits, targets, losses, lse);
  for (int64_t r = 0; r < n; ++r) {
    const float* x = logits.f32() + r * vocab;
    double m = -1e300, z = 0;
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, static_cast<double>(x[j]));
    for (int64_t j = 0; j < vocab; ++j) z += std::exp(x[j] - m);
    const double ref = m + std::log(z) - x[targets.i32()[r]];
    CHECK(losses.f32()[r] == Approx(ref).epsilon(1e-5).margin(1e-5));
  }
  CHECK(std::isfinite(losses.f32()[0]));

  logits.f32()[5] = 0.5f;
  const float grad_scale = 0.37f;  // not 1, so a missing scale fails
  auto loss = [&] {
    ops::cross_entropy_forward(logits, targets, losses, lse);
    double s = 0;
    for (int64_t r = 0; r < n; ++r) s += losses.f32()[r];
    return grad_scale * s;
  };
  loss();
  Tensor dlogits = filled(logits.shape(), 1e6f);
  ops::cross_entropy_backward(logits, targets, lse, grad_scale, dlogits);
  CHECK_GRAD(grad_check(logits, dlogits, loss, 1e-2, 222));

  // In place: dlogits aliasing logits gives the same numbers (lse recomputed: grad_check left the
  // one of its last perturbed evaluation).
  loss();
  Tensor inplace = clone(logits);
  ops::cross_entropy_backward(inplace, targets, lse, grad_scale, inplace);
  CHECK(max_abs_diff(inplace, dlogits) == 0.0);
}

TEST_CASE("cross-entropy targets outside [0, V) are errors naming the op, value and position") {
  Tensor logits = random_tensor({3, 10}, 1);
  Tensor losses = Tensor::empty({3}), lse = Tensor::empty({3});
  Tensor targets = targets_tensor({1, 2, 10});
  try {
    ops::cross_entropy_forward(logits, targets, losses, lse);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("cross_entropy_forward") != std::string::npos);
    CHECK(msg.find("10") != std::string::npos);
    CHECK(msg.find("position 2") != std::string::npos);
  }
  Tensor neg = targets_tensor({-3, 2, 1});
  CHECK_THROWS_WITH(ops::cross_entropy_backward(logits, neg, lse, 1.0f, logits),
                    Catch::Contains("cross_entropy_backward") && Catch::Contains("-3"));
}
