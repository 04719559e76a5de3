// BLAS runtime: the description names the core, ensure_fast_blas never picks a core the CPU
// cannot run, and the sgemm peak is measurable.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "kernels/blas_runtime.h"

using namespace lattice;

TEST_CASE("blas description, core decision and peak") {
  const std::string desc = blas_kernel_description();
  INFO(desc);
  CHECK(desc.find("OpenBLAS") != std::string::npos);
  CHECK(desc.find("core=") != std::string::npos);
  CHECK(desc.find("threads=") != std::string::npos);

  const std::string upgrade = blas_core_upgrade();
  __builtin_cpu_init();
  if (upgrade == "SkylakeX") CHECK(__builtin_cpu_supports("avx512f"));
  if (upgrade == "Haswell") CHECK(__builtin_cpu_supports("avx2"));
  // With the decision empty (or the variable already set) this returns without re-executing.
  if (upgrade.empty() || std::getenv("OPENBLAS_CORETYPE") != nullptr) ensure_fast_blas(0, nullptr);

  const double gflops = measure_sgemm_peak_gflops();
  WARN("sgemm peak " << gflops << " GFLOP/s; " << desc << "; upgrade='" << upgrade << "'");
  CHECK(gflops > 1.0);
}
