// OpenBLAS runtime setup and peak measurement.
#include "kernels/blas_runtime.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lattice {

namespace {

constexpr const char* kReexecMarker = "LATTICE_BLAS_REEXEC";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

std::string corename() {
  const char* c = openblas_get_corename();
  return c ? trim(c) : "";
}

}  // namespace

std::string blas_core_upgrade() {
  const std::string core = lower(corename());
  // Cores that already use the widest kernels this build has for the CPU: leave them alone.
  for (const char* good : {"zen", "skylakex", "haswell", "cooperlake", "sapphirerapids"}) {
    if (core == good) return "";
  }
  // __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512 register state (XGETBV),
  // so we never pick a core that would die with SIGILL.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

void ensure_fast_blas(int argc, char** argv) {
  (void)argc;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user chose; respect it
  if (std::getenv(kReexecMarker) != nullptr) return;        // already re-executed once
  const std::string upgrade = blas_core_upgrade();
  if (upgrade.empty()) return;
  spdlog::info("OpenBLAS picked core '{}' but this CPU supports '{}': re-executing with OPENBLAS_CORETYPE={}",
               corename(), upgrade, upgrade);
  ::setenv("OPENBLAS_CORETYPE", upgrade.c_str(), 1);
  ::setenv(kReexecMarker, "1", 1);
  std::fflush(nullptr);  // exec drops unflushed stdio buffers
  ::execv("/proc/self/exe", argv);
  // Only reached when exec failed: carry on with the slow core rather than die.
  spdlog::warn("re-exec of /proc/self/exe failed ({}); continuing with OpenBLAS core '{}'", std::strerror(errno),
               corename());
  ::unsetenv("OPENBLAS_CORETYPE");
}

std::string blas_kernel_description() {
  std::string config = openblas_get_config() ? trim(openblas_get_config()) : "OpenBLAS";
  // The config string is "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": keep the
  // name and version.
  std::string name_version = config;
  const auto first = config.find(' ');
  if (first != std::string::npos) {
    const auto second = config.find(' ', first + 1);
    name_version = config.substr(0, second);
  }
  return fmt::format("{} core={} threads={}", name_version, corename(), openblas_get_num_threads());
}

double measure_sgemm_peak_gflops() {
  constexpr int n = 1536;
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size(), 0.0f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    b[i] = static_cast<float>((i * 104729) % 1000) * 1e-3f - 0.5f;
  }
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                n);
  };
  run();  // warm-up: thread pool start, page faults
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return 2.0 * n * static_cast<double>(n) * n / best * 1e-9;
}

}  // namespace lattice
