// CUDA activations: GELU (tanh approximation, as GPT-2) and SwiGLU; the raw Backend entries, the
// same contracts as kernels/cpu/activation.h (outputs and gradients overwritten).
#pragma once

#include <cstdint>

namespace lattice::cuda {

void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* dy, const float* x, float* dx, int64_t n);
void swiglu_forward(const float* gate, const float* up, float* y, int64_t n);
void swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate, float* dup, int64_t n);

}  // namespace lattice::cuda
