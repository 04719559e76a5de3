#include "kernels/no_cuda_device.h"

#include <fmt/format.h>

namespace lattice {

namespace {

// The oldest Linux driver branch for each CUDA major version (NVIDIA's CUDA Toolkit release notes,
// "CUDA Toolkit and Minimum Required Driver Version"): a binary built with CUDA X.y runs on it
// through minor version compatibility.
std::string driver_branch_for(int runtime_cuda) {
  switch (runtime_cuda / 1000) {
    case 12: return " (the R525 driver or newer)";
    case 13: return " (the R580 driver or newer)";
    default: return "";
  }
}

}  // namespace

std::string no_cuda_device_message(std::string_view reason, int driver_cuda, int runtime_cuda) {
  const std::string head = fmt::format("no CUDA device is visible (cudaGetDeviceCount: {})", reason);
  if (driver_cuda <= 0) {
    return head + ": no NVIDIA driver is installed here (cudaDriverGetVersion finds none); run on a machine with "
                  "an NVIDIA GPU and its driver, or set device to \"cpu\"";
  }
  if (driver_cuda < runtime_cuda) {
    return head + fmt::format(": this binary was built with CUDA {} and the NVIDIA driver here supports CUDA up to {}; "
                              "install a driver for CUDA {}{}, or build lattice with a CUDA toolkit no newer than {} "
                              "(LATTICE_CUDA_PATH, see the README's GPUs section)",
                              cuda_version_text(runtime_cuda), cuda_version_text(driver_cuda),
                              cuda_version_text(runtime_cuda), driver_branch_for(runtime_cuda),
                              cuda_version_text(driver_cuda));
  }
  return head + "; run on a machine with a GPU, check CUDA_VISIBLE_DEVICES, or set device to \"cpu\"";
}

std::string cuda_version_text(int version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

}  // namespace lattice
