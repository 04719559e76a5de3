// CPU activations: GELU (tanh approximation, as GPT-2) and SwiGLU.
#pragma once

#include <cstdint>

namespace lattice::cpu {

void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* dy, const float* x, float* dx, int64_t n);
void swiglu_forward(const float* gate, const float* up, float* y, int64_t n);
void swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate, float* dup, int64_t n);

}  // namespace lattice::cpu
