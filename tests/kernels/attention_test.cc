// Causal attention (MHA and GQA): forward and lse against a naive double-precision reference,
// finite-difference gradients for q, k, v, and overwrite semantics of dq/dk/dv.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {

// Straightforward triple loop in double: out[b, i, h, :] = sum_j softmax_j(q_i . k_j / sqrt(D)) v_j,
// j <= i, kv head = h / (Hq / Hkv).
void naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::vector<double>& out,
                     std::vector<double>& lse) {
  const int64_t B = q.dim(0), T = q.dim(1), Hq = q.dim(2), D = q.dim(3), Hkv = k.dim(2);
  out.assign(q.numel(), 0.0);
  lse.assign(B * Hq * T, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto Q = [&](int64_t b, int64_t t, int64_t h, int64_t d) { return q.f32()[((b * T + t) * Hq + h) * D + d]; };
  auto K = [&](int64_t b, int64_t t, int64_t h, int64_t d) { return k.f32()[((b * T + t) * Hkv + h) * D + d]; };
  auto V = [&](int64_t b, int64_t t, int64_t h, int64_t d) { return v.f32()[((b * T + t) * Hkv + h) * D + d]; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(i + 1);
        double m = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(Q(b, i, h, d)) * K(b, j, g, d);
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(s[j] - m);
        lse[(b * Hq + h) * T + i] = m + std::log(z);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += std::exp(s[j] - m) / z * V(b, j, g, d);
          out[((b * T + i) * Hq + h) * D + d] = acc;
        }
      }
    }
}

struct Case {
  int64_t B, T, Hq, Hkv, D;
};

}  // namespace

TEST_CASE("attention forward matches a naive double reference (MHA and GQA)") {
  for (Case c : {Case{2, 11, 4, 4, 16}, Case{2, 13, 6, 2, 8}, Case{1, 37, 4, 1, 32}, Case{3, 5, 2, 2, 8}}) {
    CAPTURE(c.B, c.T, c.Hq, c.Hkv, c.D);
    // Scores of a few units so the softmax is far from uniform.
    Tensor q = random_tensor({c.B, c.T, c.Hq, c.D}, 1, -2.0f, 2.0f);
    Tensor k = random_tensor({c.B, c.T, c.Hkv, c.D}, 2, -2.0f, 2.0f);
    Tensor v = random_tensor({c.B, c.T, c.Hkv, c.D}, 3);
    Tensor out = Tensor::empty(q.shape()), lse = Tensor::empty({c.B, c.Hq, c.T});
    ops::attention_forward(q, k, v, out, lse);
    std::vector<double> ref_out, ref_lse;
    naive_attention(q, k, v, ref_out, ref_lse);
    double err_out = 0, err_lse = 0;
    for (int64_t i = 0; i < out.numel(); ++i) err_out = std::max(err_out, std::abs(out.f32()[i] - ref_out[i]));
    for (int64_t i = 0; i < lse.numel(); ++i) err_lse = std::max(err_lse, std::abs(lse.f32()[i] - ref_lse[i]));
    CHECK(err_out < 2e-5);
    CHECK(err_lse < 2e-5);
  }
}

TEST_CASE("attention gradients by finite differences (MHA and GQA, T not a power of two)") {
  for (Case c : {Case{2, 7, 3, 3, 8}, Case{2, 6, 4, 2, 8}, Case{1, 5, 4, 1, 12}}) {
    CAPTURE(c.B, c.T, c.Hq, c.Hkv, c.D);
    Tensor q = random_tensor({c.B, c.T, c.Hq, c.D}, 11, -1.5f, 1.5f);
    Tensor k = random_tensor({c.B, c.T, c.Hkv, c.D}, 12, -1.5f, 1.5f);
    Tensor v = random_tensor({c.B, c.T, c.Hkv, c.D}, 13);
    Tensor r = random_tensor(q.shape(), 14);
    Tensor out = Tensor::empty(q.shape()), lse = Tensor::empty({c.B, c.Hq, c.T});
    auto loss = [&] {
      ops::attention_forward(q, k, v, out, lse);
      return project(out, r);
    };
    loss();
    Tensor dq = filled(q.shape(), 1e6f), dk = filled(k.shape(), 1e6f), dv = filled(v.shape(), 1e6f);
    ops::attention_backward(r, q, k, v, out, lse, dq, dk, dv);
    // 64 sampled entries per tensor (of 168..336): keeps the test fast on a loaded 2-core machine.
    CHECK_GRAD(grad_check(q, dq, loss, 1e-2, 64));
    CHECK_GRAD(grad_check(k, dk, loss, 1e-2, 64));
    CHECK_GRAD(grad_check(v, dv, loss, 1e-2, 64));
  }
}

TEST_CASE("attention checks its shapes") {
  Tensor q = random_tensor({1, 4, 3, 8}, 1), k = random_tensor({1, 4, 2, 8}, 2);
  Tensor out = Tensor::empty(q.shape()), lse = Tensor::empty({1, 3, 4});
  CHECK_THROWS_WITH(ops::attention_forward(q, k, k, out, lse), Catch::Contains("attention_forward"));
}
