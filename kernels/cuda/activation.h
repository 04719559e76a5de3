// CUDA activations: GELU (tanh approximation, as GPT-2) and SwiGLU; the typed Backend entries
// (kernels/typed_kernels.h: each operand f32 or bf16), the same contracts as kernels/cpu/activation.h
// (outputs and gradients overwritten).
#pragma once

#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice::cuda {

void gelu_forward(DataIn x, DataOut y, int64_t n);
void gelu_backward(DataIn dy, DataIn x, DataOut dx, int64_t n);
void swiglu_forward(DataIn gate, DataIn up, DataOut y, int64_t n);
void swiglu_backward(DataIn dy, DataIn gate, DataIn up, DataOut dgate, DataOut dup, int64_t n);

}  // namespace lattice::cuda
