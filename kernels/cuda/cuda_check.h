// Error checks for CUDA runtime and library calls, usable from nvcc (.cu) and g++ (.cc) sources:
// a failing call throws lattice::Error naming the call, the error and file:line.
#pragma once

#include <cuda_runtime.h>

namespace lattice::cuda {

// Throws lattice::Error "<file>:<line>: <call> failed: <what>" (defined in cuda_check.cc).
[[noreturn]] void fail(const char* call, const char* what, const char* file, int line);

}  // namespace lattice::cuda

// cudaError_t-returning calls: LATTICE_CUDA_CHECK(cudaMemsetAsync(...)).
#define LATTICE_CUDA_CHECK(call)                                                       \
  do {                                                                                 \
    const cudaError_t lattice_cuda_err_ = (call);                                      \
    if (lattice_cuda_err_ != cudaSuccess) {                                            \
      ::lattice::cuda::fail(#call, cudaGetErrorString(lattice_cuda_err_), __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// After a kernel launch: a bad configuration or an earlier asynchronous fault shows up here.
#define LATTICE_CUDA_LAUNCHED() LATTICE_CUDA_CHECK(cudaGetLastError())
