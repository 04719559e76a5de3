// ensure_fast_blas end to end: the test makes OpenBLAS load a weak core on purpose
// (OPENBLAS_CORETYPE=Prescott), hides the variable as if OpenBLAS had misdetected the CPU, and
// checks that ensure_fast_blas re-executes the binary with the best core this CPU can run (never
// one it can't: it would die with SIGILL), exactly once.
//   phase 0: set OPENBLAS_CORETYPE=Prescott, exec self
//   phase 1: OpenBLAS runs "Prescott"; unset the variable; ensure_fast_blas must exec (no return)
//   phase 2: OpenBLAS runs the upgraded core; ensure_fast_blas must return (loop guard)
#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/blas_runtime.h"

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  return 1;
}

std::string expected_core() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const char* phase_env = std::getenv("LATTICE_TEST_PHASE");
  const int phase = phase_env ? std::atoi(phase_env) : 0;
  const std::string core = openblas_get_corename();
  std::printf("phase %d: %s\n", phase, lattice::blas_kernel_description().c_str());
  if (phase == 0) {
    if (expected_core().empty()) {
      // A CPU without AVX2: no faster core exists, so ensure_fast_blas must neither pick one (it
      // would die with SIGILL) nor re-exec; reaching the next line is the check.
      ::unsetenv("LATTICE_BLAS_REEXEC");
      lattice::ensure_fast_blas(argc, argv);
      if (!lattice::blas_core_upgrade().empty()) return fail("an upgrade was offered for a CPU without AVX2");
      std::printf("CPU has neither AVX2 nor AVX-512: ensure_fast_blas kept core %s, as it must\n", core.c_str());
      return 0;
    }
    ::unsetenv("LATTICE_BLAS_REEXEC");
    ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    ::setenv("LATTICE_TEST_PHASE", "1", 1);
    std::fflush(stdout);
    ::execv("/proc/self/exe", argv);
    return fail(std::string("exec failed: ") + std::strerror(errno));
  }
  if (phase == 1) {
    if (core != "Prescott") return fail("OpenBLAS did not load the forced Prescott core but " + core);
    ::unsetenv("OPENBLAS_CORETYPE");
    ::setenv("LATTICE_TEST_PHASE", "2", 1);
    lattice::ensure_fast_blas(argc, argv);
    return fail("ensure_fast_blas returned although OpenBLAS runs Prescott on a better CPU");
  }
  // phase 2
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (chosen == nullptr || expected_core() != chosen) {
    return fail(std::string("OPENBLAS_CORETYPE is ") + (chosen ? chosen : "unset") + ", expected " + expected_core());
  }
  if (core != expected_core()) return fail("OpenBLAS runs " + core + " after the re-exec");
  lattice::ensure_fast_blas(argc, argv);  // must return: marker set and the variable chosen
  ::unsetenv("OPENBLAS_CORETYPE");
  lattice::ensure_fast_blas(argc, argv);  // marker alone must also stop a second re-exec
  std::printf("PASS: re-executed once with OPENBLAS_CORETYPE=%s\n", chosen);
  return 0;
}
