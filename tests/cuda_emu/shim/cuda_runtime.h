// Stands in for <cuda_runtime.h> in the emulated build (tests/cuda_emu/emulator.h): CUDA's
// keywords, built-ins and intrinsics as the kernels in kernels/cuda use them, mapped onto the
// emulator; the runtime calls they make, on host memory (every "device" pointer is a host one).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tests/cuda_emu/emulator.h"
#include "tests/cuda_emu/shim/cuda_types.h"
#include "tests/cuda_emu/streams.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time: a static is the block's shared memory

#define threadIdx (::lattice::emu::thread_idx())
#define blockIdx (::lattice::emu::block_idx())
#define blockDim (::lattice::emu::block_dim())
#define gridDim (::lattice::emu::grid_dim())

// CUDA's integer min for device code (global namespace).
inline int min(int a, int b) { return b < a ? b : a; }
inline int max(int a, int b) { return a < b ? b : a; }

inline void __syncthreads() { ::lattice::emu::syncthreads(); }

template <class T>
T __shfl_xor_sync(unsigned /*mask: the emulator requires every lane*/, T value, int lane_mask) {
  static_assert(sizeof(T) <= 8, "__shfl_xor_sync: up to 8 bytes");
  T out;
  ::lattice::emu::warp_exchange(&value, &out, sizeof(T), ::lattice::emu::lane_id() ^ lane_mask);
  return out;
}

inline unsigned __ballot_sync(unsigned /*mask*/, bool predicate) { return ::lattice::emu::warp_ballot(predicate); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }

// One block's threads run one at a time: a read-modify-write is atomic.
inline unsigned long long atomicMin(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = std::min(old, value);
  return old;
}

// ---- the runtime calls the kernels' host code makes: copies run in their stream's turn; the
// streams and events are in tests/cuda_emu/streams.h ----

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr) {
  ::lattice::emu::run_on(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t stream = nullptr) {
  ::lattice::emu::run_on(stream, [=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }  // the emulator throws at a bad launch
inline const char* cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
template <class Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
inline cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
