// The no-GPU error names what is missing. The reasons are cudaGetErrorString's words for the errors
// cudaGetDeviceCount gives (CUDA runtime API, "Error Handling"): cudaErrorInsufficientDriver both
// with no driver and with one too old, cudaErrorNoDevice with no device visible.
#include <catch2/catch.hpp>

#include <string>

#include "kernels/no_cuda_device.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lattice::no_cuda_device_message;

namespace {
constexpr const char* kInsufficient = "CUDA driver version is insufficient for CUDA runtime version";
constexpr int kCuda13_0 = 13000, kCuda12_4 = 12040, kCuda13_2 = 13020;
}  // namespace

TEST_CASE("no driver at all is named as such, not as an old driver") {
  const std::string m = no_cuda_device_message(kInsufficient, 0, kCuda13_0);
  CHECK_THAT(m, StartsWith(std::string("no CUDA device is visible (cudaGetDeviceCount: ") + kInsufficient + ")"));
  CHECK_THAT(m, Contains("no NVIDIA driver is installed here"));
  CHECK_THAT(m, Contains("set device to \"cpu\""));
  CHECK_THAT(m, !Contains("supports CUDA up to"));
}

TEST_CASE("a driver older than the runtime: both versions, the driver to install, the toolkit to build with") {
  const std::string m = no_cuda_device_message(kInsufficient, kCuda12_4, kCuda13_0);
  CHECK_THAT(m, Contains("built with CUDA 13.0 and the NVIDIA driver here supports CUDA up to 12.4"));
  CHECK_THAT(m, Contains("install a driver for CUDA 13.0 (the R580 driver or newer)"));
  CHECK_THAT(m, Contains("a CUDA toolkit no newer than 12.4 (LATTICE_CUDA_PATH"));
  // A CUDA 12 build names CUDA 12's driver branch; an unknown major names none.
  CHECK_THAT(no_cuda_device_message(kInsufficient, 11080, 12060), Contains("CUDA 12.6 (the R525 driver"));
  CHECK_THAT(no_cuda_device_message(kInsufficient, 13000, 14010), Contains("CUDA 14.1, or build"));
  // Within a major version too (minor version compatibility covers most of these; not all).
  CHECK_THAT(no_cuda_device_message(kInsufficient, kCuda13_0, kCuda13_2), Contains("up to 13.0"));
}

TEST_CASE("a driver new enough but no device: the visible-devices hint") {
  for (const char* reason : {"no CUDA-capable device is detected", "0 devices"}) {
    for (const int driver : {kCuda13_0, kCuda13_2}) {
      const std::string m = no_cuda_device_message(reason, driver, kCuda13_0);
      CHECK_THAT(m, StartsWith(std::string("no CUDA device is visible (cudaGetDeviceCount: ") + reason + ")"));
      CHECK_THAT(m, Contains("check CUDA_VISIBLE_DEVICES"));
      CHECK_THAT(m, !Contains("driver"));
    }
  }
}
