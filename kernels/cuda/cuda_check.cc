// The error thrower behind LATTICE_CUDA_CHECK (kernels/cuda/cuda_check.h); also compiled into the
// CPU emulator's backend (tests/cuda_emu), so both report a failed call in the same words.
#include "kernels/cuda/cuda_check.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice::cuda {

void fail(const char* call, const char* what, const char* file, int line) {
  throw Error(fmt::format("{}:{}: {} failed: {}", file, line, call, what));
}

}  // namespace lattice::cuda
