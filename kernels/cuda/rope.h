// CUDA rotary position embedding (Hugging Face rotate-half convention), in place on [B, T, H, D];
// the raw Backend entry, the same contract as kernels/cpu/rope.h.
#pragma once

#include <cstdint>

namespace lattice::cuda {

// inverse = false: out = x cos + rotate_half(x) sin; inverse = true: the transpose (= inverse)
// rotation, used for gradients.
void rope(float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse);

}  // namespace lattice::cuda
