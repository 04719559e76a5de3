// The CPU backend's table (OpenBLAS + OpenMP kernels of kernels/cpu/): the oracle every other
// backend is tested against, registered for Device::kCpu from the start.
#pragma once

#include "kernels/backend.h"

namespace lattice::cpu {

const Backend& backend();

}  // namespace lattice::cpu
