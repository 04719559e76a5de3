// Launch helpers shared by the .cu kernel files.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace lattice::cuda {

// Blocks of `threads` covering n items, capped (kernels use grid-stride loops).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 32 ? 65535 * 32 : blocks));
}

}  // namespace lattice::cuda
