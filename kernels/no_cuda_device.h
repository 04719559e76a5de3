// The error a CUDA process gives when it finds no GPU to use, worded by what is missing: an NVIDIA
// driver, a driver new enough for this binary's CUDA runtime, or a visible device. CUDA's own reason
// misleads in the first case: with no driver at all cudaGetDeviceCount answers "CUDA driver version
// is insufficient for CUDA runtime version", as it does for a driver that is only too old.
// Plain C++ (no CUDA header), so that the CPU-only build tests every case.
#pragma once

#include <string>
#include <string_view>

namespace lattice {

// reason: cudaGetErrorString of cudaGetDeviceCount's error, or "0 devices". driver_cuda and
// runtime_cuda: cudaDriverGetVersion's and cudaRuntimeGetVersion's major * 1000 + minor * 10, the
// driver's 0 when no driver is installed. Starts "no CUDA device is visible (cudaGetDeviceCount:
// <reason>)" and says what to do.
std::string no_cuda_device_message(std::string_view reason, int driver_cuda, int runtime_cuda);

// A CUDA version number as CUDA gives it (major * 1000 + minor * 10) written "major.minor", as here
// and on the device line (kernels/cuda/runtime.cc).
std::string cuda_version_text(int version);

}  // namespace lattice
