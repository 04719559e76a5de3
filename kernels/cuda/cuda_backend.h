// The CUDA backend's table (kernels/backend.h). Linking //kernels/cuda registers it for
// Device::kCuda at startup; nothing touches the GPU until the first CUDA call.
#pragma once

#include "kernels/backend.h"

namespace lattice::cuda {

const Backend& backend();

}  // namespace lattice::cuda
