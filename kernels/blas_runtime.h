// OpenBLAS runtime setup: pick a GEMM core the CPU can actually run at full speed (re-exec with
// OPENBLAS_CORETYPE when the library misdetects it), describe the BLAS for the log, measure peak.
#pragma once

#include <string>

namespace lattice {

// Call first thing in main(). If OPENBLAS_CORETYPE is unset and OpenBLAS chose a core weaker than
// the CPU supports (e.g. "Prescott" on an AVX-512 Xeon), sets OPENBLAS_CORETYPE to the best core
// the CPU can run ("SkylakeX" for AVX-512 F/BW/DQ/VL, "Haswell" for AVX2+FMA) and re-executes
// /proc/self/exe with the same argv (OpenBLAS reads the variable only when it loads). The env
// marker LATTICE_BLAS_REEXEC prevents loops. Returns normally when nothing needs to change.
void ensure_fast_blas(int argc, char** argv);

// The chosen core in words, e.g. "OpenBLAS 0.3.21 core=Zen threads=2" (from the config string).
std::string blas_kernel_description();

// What ensure_fast_blas would choose for this CPU and library: "" to keep the current core, else
// the OPENBLAS_CORETYPE value. Exposed for tests and the log.
std::string blas_core_upgrade();

// Times a 1536^3 sgemm (one warm-up, five timed runs) and returns the best GFLOP/s.
double measure_sgemm_peak_gflops();

}  // namespace lattice
