// matmul: known answers against a naive loop, alpha/beta semantics, flattened leading dims,
// finite-difference gradients for all four transpose combinations, and shape errors.
#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {

// op(a)[i, p] for a stored [rows, cols].
float at(const Tensor& a, bool trans, int64_t i, int64_t p) {
  const int64_t cols = a.dim(-1);
  return trans ? a.f32()[p * cols + i] : a.f32()[i * cols + p];
}

Tensor naive(const Tensor& a, bool ta, const Tensor& b, bool tb, int64_t m, int64_t n, int64_t k) {
  Tensor c = Tensor::zeros({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(at(a, ta, i, p)) * at(b, tb, p, j);
      c.f32()[i * n + j] = static_cast<float>(s);
    }
  return c;
}

}  // namespace

TEST_CASE("matmul matches a naive product for all transpose combinations, with alpha and beta") {
  const int64_t m = 13, n = 9, k = 17;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor ref = naive(a, ta, b, tb, m, n, k);
      Tensor c = filled({m, n}, 1e30f);  // beta = 0 must overwrite, not read garbage * 0
      ops::matmul(a, ta, b, tb, c);
      CHECK(max_abs_diff(c, ref) < 1e-5);

      Tensor c0 = random_tensor({m, n}, 3);
      Tensor c2 = clone(c0);
      ops::matmul(a, ta, b, tb, c2, 0.5f, 2.0f);  // c2 = 0.5 ab + 2 c0
      Tensor expect = clone(c0);
      ops::scale(expect, 2.0f);
      ops::axpy(0.5f, ref, expect);
      CHECK(max_abs_diff(c2, expect) < 1e-5);
    }
  }
}

TEST_CASE("matmul flattens leading dims of a and c") {
  Tensor a = random_tensor({2, 3, 5}, 4);  // [6, 5]
  Tensor w = random_tensor({5, 4}, 5);
  Tensor c = Tensor::empty({2, 3, 4});
  ops::matmul(a, false, w, false, c);
  Tensor ref = naive(a.view({6, 5}), false, w, false, 6, 4, 5);
  CHECK(max_abs_diff(c, ref) < 1e-5);
  // Weight gradient: a^T [5, 6] @ c [6, 4], a and c passed as 3-D.
  Tensor dw = Tensor::empty({5, 4});
  ops::matmul(a, true, c, false, dw);
  Tensor ref2 = naive(a.view({6, 5}), true, c.view({6, 4}), false, 5, 4, 6);
  CHECK(max_abs_diff(dw, ref2) < 1e-5);
}

TEST_CASE("matmul gradients by finite differences, all four transpose combinations") {
  const int64_t m = 6, n = 5, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CAPTURE(ta, tb);
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 11);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 12);
      Tensor r = random_tensor({m, n}, 13);
      Tensor c = Tensor::empty({m, n});
      auto loss = [&] {
        ops::matmul(a, ta, b, tb, c);
        return project(c, r);
      };
      // dL/dop(a) = R op(b)^T [m, k]; dL/dop(b) = op(a)^T R [k, n]. Stored layouts:
      //   ta: da[k, m] = op(b) R^T, else da[m, k] = R op(b)^T
      //   tb: db[n, k] = R^T op(a), else db[k, n] = op(a)^T R
      // Start from random contents and accumulate with beta = 1 (as parameter grads do).
      Tensor da0 = random_tensor(a.shape(), 14), db0 = random_tensor(b.shape(), 15);
      Tensor da = clone(da0), db = clone(db0);
      if (ta) {
        ops::matmul(b, tb, r, true, da, 1.0f, 1.0f);
      } else {
        ops::matmul(r, false, b, !tb, da, 1.0f, 1.0f);
      }
      if (tb) {
        ops::matmul(r, true, a, ta, db, 1.0f, 1.0f);
      } else {
        ops::matmul(a, !ta, r, false, db, 1.0f, 1.0f);
      }
      CHECK_GRAD(grad_check(a, minus(da, da0), loss));
      CHECK_GRAD(grad_check(b, minus(db, db0), loss));
    }
  }
}

TEST_CASE("matmul rejects mismatched shapes with a message naming the op") {
  Tensor a = random_tensor({4, 3}, 1), b = random_tensor({5, 2}, 2), c = Tensor::empty({4, 2});
  try {
    ops::matmul(a, false, b, false, c);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("matmul") != std::string::npos);
    CHECK(msg.find("[4, 3]") != std::string::npos);
  }
  Tensor good_b = random_tensor({3, 2}, 3), bad_c = Tensor::empty({4, 3});
  CHECK_THROWS_AS(ops::matmul(a, false, good_b, false, bad_c), Error);
  CHECK_THROWS_AS(ops::matmul(a, false, good_b, false, a), Error);  // output overlaps input
}
