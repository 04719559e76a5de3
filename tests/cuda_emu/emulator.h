// A CPU emulator for our CUDA kernels, so the CPU can run them against the CPU oracle where no GPU
// is lent (tests/cuda_emu). kernels/cuda/*.cu are rewritten (rewrite_cu.py) into C++ whose launches
// call emu::launch and whose built-ins (threadIdx, __syncthreads, __shfl_xor_sync, ...) come from
// shim/cuda_runtime.h. A launch runs in its turn on its stream (streams.h), its blocks one after
// another; a block's threads are fibers on one host thread, switched at each barrier, shuffle and
// ballot, so __shared__ memory (a static) is the block's; odd blocks run their threads in reverse
// order. It reports what a GPU would leave silent: a bad launch configuration, a warp split between
// a shuffle and __syncthreads, a shuffle or ballot after some of the warp's lanes exited.
//
// A missing barrier shows where one of the two thread orders has a thread read before another
// writes. What it does not show: races that need another interleaving, the GPU's arithmetic where
// it differs from the host's (nvcc contracts a * b + c into fma; glibc's expf and logf are not
// CUDA's), speed, and cuBLASLt or cuDNN, which the emulated backend replaces with the CPU's GEMM and
// the emulated f32 attention kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tests/cuda_emu/shim/cuda_types.h"
#include "tests/cuda_emu/streams.h"

namespace lattice::emu {

struct LaunchConfig {
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;  // null: the compute stream
  LaunchConfig(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = nullptr) : grid(g), block(b),
      dynamic_shared_bytes(smem), stream(s) {}
};

// Runs thread_body once per thread of every block, blocks in order. When the first block's threads
// reach no barrier, the other blocks' threads run as plain calls (fast), and one that reaches a
// barrier then is an error.
void run_grid(const LaunchConfig& config, const std::function<void()>& thread_body);

// The kernel's arguments are copied once, as a launch copies them, and each thread calls it with them
// when the launch's turn on its stream comes.
template <class Kernel, class... Args>
void launch(const LaunchConfig& config, Kernel kernel, Args... args) {
  run_on(config.stream, [config, kernel, args...] { run_grid(config, [&] { kernel(args...); }); });
}

// The built-ins, for the current thread.
const uint3& thread_idx();
const uint3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
void* dynamic_shared();
// A static __shared__ array as rewrite_cu.py declares it: set to all bits 1 (NaN, or -1) the first
// time a thread of each block reaches it, so a read of what no thread of the block wrote shows.
void block_shared(void* array, size_t bytes);
int lane_id();  // the thread's lane in its warp (linear thread index mod 32)

void syncthreads();
// Every active lane of the warp passes `bits` (up to 8 bytes) and gets lane `src_lane`'s.
void warp_exchange(const void* bits, void* out, size_t bytes, int src_lane);
unsigned warp_ballot(bool predicate);

}  // namespace lattice::emu
