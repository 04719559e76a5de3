// CPU activations. GELU uses 0.5 * (1 + tanh(u)) == sigmoid(2u), which is the same function as
// GPT-2's formula, stable at both tails, and vectorizes through fast_exp.
#include "kernels/cpu/activation.h"

#include "kernels/cpu/vec_math.h"

namespace lattice::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;
}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kCoeff * v * v * v);
    y[i] = v * fast_sigmoid(2.0f * u);
  }
}

void gelu_backward(const float* dy, const float* x, float* dx, int64_t n) {
  // y = x s, s = sigmoid(2u): dy/dx = s + x * 2 s (1 - s) * du/dx, du/dx = sqrt(2/pi) (1 + 3c x^2).
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kCoeff * v * v * v);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
    const float s = fast_sigmoid(2.0f * u);
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

void swiglu_forward(const float* gate, const float* up, float* y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g * fast_sigmoid(g) * up[i];
  }
}

void swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate, float* dup, int64_t n) {
  // silu(g) = g s, silu'(g) = s (1 + g (1 - s)).
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], u = up[i], d = dy[i];
    const float s = fast_sigmoid(g);
    dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    dup[i] = d * g * s;
  }
}

}  // namespace lattice::cpu
