// The --version text: version, commit and build description.
#include "trainer/version.h"

#include <fmt/format.h>

#include "kernels/blas_runtime.h"

namespace lattice {

std::string version_text() {
#ifdef LATTICE_CUDA_BUILD
  const char* backend = "CPU + CUDA (built with --config=cuda)";
#else
  const char* backend = "CPU only (build with --config=cuda for the CUDA backend)";
#endif
  return fmt::format("lattice {}\ncommit   {}\nbackend  {}\ncompiler {} {}\nBLAS     {}", kVersion, git_commit(),
                     backend,
#if defined(__clang__)
                     "clang",
#else
                     "gcc",
#endif
                     __VERSION__, blas_kernel_description());
}

}  // namespace lattice
