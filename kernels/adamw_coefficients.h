// The per-call scalars of an AdamW step, computed once on the host in double and rounded to float,
// shared by every backend's kernel so that they all step with the same numbers.
#pragma once

#include <cmath>

#include "kernels/ops.h"

namespace lattice {

struct AdamWCoefficients {
  float step_size;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
  float decay;         // 1 - lr * weight_decay (decoupled, on the pre-update parameter)
  float one_minus_b1;
  float one_minus_b2;
};

// p -= lr * m_hat / (sqrt(v_hat) + eps), with m_hat = m / bc1 and sqrt(v_hat) = sqrt(v) / sqrt(bc2),
// bc = 1 - beta^t.
inline AdamWCoefficients adamw_coefficients(const ops::AdamWParams& p) {
  const double t = static_cast<double>(p.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), t);
  return {static_cast<float>(static_cast<double>(p.lr) / bc1), static_cast<float>(1.0 / std::sqrt(bc2)),
          static_cast<float>(1.0 - static_cast<double>(p.lr) * static_cast<double>(p.weight_decay)),
          static_cast<float>(1.0 - static_cast<double>(p.beta1)), static_cast<float>(1.0 - static_cast<double>(p.beta2))};
}

}  // namespace lattice
