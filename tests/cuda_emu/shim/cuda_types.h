// The CUDA runtime's types as the emulated kernels and backend use them (tests/cuda_emu): no
// CUDA toolkit is on the include path of an emulated build.
#pragma once

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600 };
enum : unsigned { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
using cudaHostFn_t = void (*)(void*);
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
