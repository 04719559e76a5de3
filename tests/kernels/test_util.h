// Shared helpers for the kernel tests: seeded random tensors, a projected scalar loss, and a
// central finite-difference gradient checker.
//
// Gradient-check technique: pick random inputs and a random projection R, define
// L = sum(R * out) accumulated in double, and compare each analytic gradient entry with
// (L(x + h) - L(x - h)) / 2h computed in fp32 kernels with h = 1e-2.
// Tolerance: max_i |g_i - fd_i| <= 1e-2 * max_i |fd_i| + 1e-4.
//   - truncation error of the central difference is h^2/6 * |L'''| ~ 2e-5 for our O(1) inputs;
//   - roundoff: each forward output carries ~1e-7 relative fp32 error; summed over <= ~2000
//     outputs of size O(1) that is <~1e-5 in L, divided by 2h = 2e-2 gives <~5e-4 absolute in
//     the worst case, typically 1e-5; the 1e-4 floor plus 1% of the largest gradient covers it.
//   - a wrong sign or a factor 2 on any entry of size near max|fd| makes the error ~max|fd|,
//     100x over the bound; every check also requires max|fd| > 1e-2 so it can't pass vacuously.
//     (grad_check_test.cc verifies that the checker rejects such mistakes.)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace lattice::test {

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

inline Tensor filled(const Shape& shape, float value) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = value;
  return t;
}

inline Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  ops::copy(t, c);
  return c;
}

// Whether two host tensors hold the same bytes (same dtype size and numel).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// sum(r * out) in double.
inline double project(const Tensor& out, const Tensor& r) {
  REQUIRE(out.numel() == r.numel());
  double s = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) s += static_cast<double>(out.f32()[i]) * r.f32()[i];
  return s;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(a.f32()[i]) - b.f32()[i]));
  return m;
}

struct GradCheck {
  double max_err = 0.0;  // max |analytic - fd|
  double max_fd = 0.0;   // max |fd|
  int checked = 0;
  bool ok(double rtol = 1e-2, double atol = 1e-4) const { return max_fd > 1e-2 && max_err <= rtol * max_fd + atol; }
};

// Compares `grad` (the analytic dL/dx, same shape as x) with central differences of `loss`
// perturbing entries of `x` in place (restored afterwards). Checks every entry when x has at most
// `max_entries`, otherwise a seeded random subset of that many.
inline GradCheck grad_check(Tensor& x, const Tensor& grad, const std::function<double()>& loss,
                            double h = 1e-2, int max_entries = 160, uint32_t seed = 7) {
  REQUIRE(x.numel() == grad.numel());
  std::vector<int64_t> idx;
  if (x.numel() <= max_entries) {
    for (int64_t i = 0; i < x.numel(); ++i) idx.push_back(i);
  } else {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int64_t> d(0, x.numel() - 1);
    for (int i = 0; i < max_entries; ++i) idx.push_back(d(gen));
  }
  GradCheck r;
  float* p = x.f32();
  for (int64_t i : idx) {
    const float saved = p[i];
    p[i] = saved + static_cast<float>(h);
    const double lp = loss();
    p[i] = saved - static_cast<float>(h);
    const double lm = loss();
    p[i] = saved;
    // The perturbation actually applied in fp32 may differ slightly from h.
    const double step = static_cast<double>(saved + static_cast<float>(h)) - (saved - static_cast<float>(h));
    const double fd = (lp - lm) / step;
    r.max_fd = std::max(r.max_fd, std::abs(fd));
    r.max_err = std::max(r.max_err, std::abs(fd - grad.f32()[i]));
    ++r.checked;
  }
  return r;
}

// grad - base, elementwise: the part a backward accumulated on top of `base`.
inline Tensor minus(const Tensor& a, const Tensor& base) {
  Tensor d = clone(a);
  ops::axpy(-1.0f, base, d);
  return d;
}

#define CHECK_GRAD(result)                                                                              \
  do {                                                                                                  \
    const ::lattice::test::GradCheck& _r = (result);                                                    \
    INFO("max |analytic - fd| = " << _r.max_err << ", max |fd| = " << _r.max_fd << ", entries " << _r.checked); \
    CHECK(_r.ok());                                                                                     \
  } while (0)

}  // namespace lattice::test
