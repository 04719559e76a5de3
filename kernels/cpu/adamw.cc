// CPU AdamW (PyTorch AdamW / Megatron semantics): decoupled weight decay on the pre-update
// parameter, then the bias-corrected Adam step. One pass over memory, OpenMP + SIMD.
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <cstdint>

#include "kernels/adamw_coefficients.h"

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
  const AdamWCoefficients c = adamw_coefficients(p);
  adamw_loop(n, param, grad, exp_avg, exp_avg_sq, p.grad_scale, p.beta1, c.one_minus_b1, p.beta2, c.one_minus_b2,
             p.eps, c.inv_sqrt_bc2, c.step_size, c.decay);
}

}  // namespace lattice::cpu
