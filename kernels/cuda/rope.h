// CUDA rotary position embedding (Hugging Face rotate-half convention), in place on [B, T, H, D];
// the typed Backend entry (x f32 or bf16: kernels/typed_kernels.h), the same contract as
// kernels/cpu/rope.h.
#pragma once

#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice::cuda {

// inverse = false: out = x cos + rotate_half(x) sin; inverse = true: the transpose (= inverse)
// rotation, used for gradients.
void rope(DataOut x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse);

}  // namespace lattice::cuda
