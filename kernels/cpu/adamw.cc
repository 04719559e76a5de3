// CPU AdamW (PyTorch AdamW / Megatron semantics): decoupled weight decay on the pre-update
// parameter, then the bias-corrected Adam step. One pass over memory, OpenMP + SIMD.
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <cstdint>

// Vectorizes with -fno-math-errno (kernels/BUILD.bazel copts): sqrt without an errno branch.

namespace lattice::cpu {
namespace {

void adamw_loop(int64_t n, float* __restrict pw, const float* __restrict gw, float* __restrict mw,
                float* __restrict vw, float gs, float b1, float one_minus_b1, float b2, float one_minus_b2,
                float eps, float inv_sqrt_bc2, float step_size, float decay) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gw[i] * gs;
    const float m = b1 * mw[i] + one_minus_b1 * g;
    const float v = b2 * vw[i] + one_minus_b2 * g * g;
    mw[i] = m;
    vw[i] = v;
    const float denom = std::sqrt(v) * inv_sqrt_bc2 + eps;
    pw[i] = pw[i] * decay - step_size * (m / denom);
  }
}

}  // namespace

void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const ops::AdamWParams& p) {
  // Bias corrections once per call, in double: bc = 1 - beta^t.
  const double t = static_cast<double>(p.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), t);
  // p -= lr * m_hat / (sqrt(v_hat) + eps), with m_hat = m / bc1 and sqrt(v_hat) = sqrt(v) / sqrt(bc2).
  const float step_size = static_cast<float>(static_cast<double>(p.lr) / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  // Decoupled weight decay on the pre-update parameter: p *= 1 - lr * wd.
  const float decay = static_cast<float>(1.0 - static_cast<double>(p.lr) * static_cast<double>(p.weight_decay));
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(p.beta1));
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(p.beta2));
  adamw_loop(n, param, grad, exp_avg, exp_avg_sq, p.grad_scale, p.beta1,
             one_minus_b1, p.beta2, one_minus_b2, p.eps, inv_sqrt_bc2, step_size, decay);
}

}  // namespace lattice::cpu
