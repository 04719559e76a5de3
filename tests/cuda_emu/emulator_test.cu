// The CUDA emulator's own behaviour (tests/cuda_emu/emulator.h) on small kernels, written as CUDA
// and rewritten by rewrite_cu.py like kernels/cuda/*.cu (so the rewrite is tested too).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace lattice::emu {
namespace {

// out[block * threads + t] = the sum of the block's thread indices, through shared memory.
__global__ void block_sum_kernel(int* out, bool with_barrier) {
  __shared__ int partial[256];
  partial[threadIdx.x] = static_cast<int>(threadIdx.x);
  if (with_barrier) __syncthreads();
  int sum = 0;
  for (unsigned i = 0; i < blockDim.x; ++i) sum += partial[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__global__ void xor_shuffle_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[threadIdx.x] = v;
}

__global__ void ballot_kernel(unsigned* out) { out[threadIdx.x] = __ballot_sync(0xffffffffu, threadIdx.x % 3 == 0); }

__global__ void early_exit_shuffle_kernel(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void split_warp_kernel(float* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  } else {
    __syncthreads();
  }
}

__global__ void dynamic_shared_kernel(float* out) {
  extern __shared__ float smem[];
  out[threadIdx.x] = smem[threadIdx.x];  // never written: must not read as a plausible value
}

std::string launch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("__syncthreads orders shared memory; without it a thread reads before others write") {
  std::vector<int> out(4 * 256, -1);
  block_sum_kernel<<<4, 256>>>(out.data(), true);
  for (int v : out) REQUIRE(v == 255 * 256 / 2);
  block_sum_kernel<<<4, 256>>>(out.data(), false);
  int wrong = 0;
  for (int v : out) wrong += v != 255 * 256 / 2;
  CHECK(wrong > 0);
}

TEST_CASE("warp shuffles and ballots exchange between the lanes of each warp") {
  std::vector<float> sums(64);
  xor_shuffle_kernel<<<1, 64>>>(sums.data());
  for (int t = 0; t < 64; ++t) CHECK(sums[t] == (t < 32 ? 496.0f : 32 * 32 + 496.0f));  // sum of the warp's lanes
  std::vector<unsigned> masks(64);
  ballot_kernel<<<1, 64>>>(masks.data());
  CHECK(masks[0] == 0x49249249u);   // lanes 0, 3, ..., 30
  CHECK(masks[40] == 0x92492492u);  // thread 33 is lane 1: lanes 1, 4, ..., 31
}

TEST_CASE("what a GPU would leave silent is an error") {
  std::vector<float> out(64);
  CHECK_THAT(launch_error([&] { early_exit_shuffle_kernel<<<1, 32>>>(out.data()); }),
             Catch::Contains("after some of its lanes exited"));
  CHECK_THAT(launch_error([&] {
               split_warp_kernel<<<1, 32>>>(out.data());
             }),
             Catch::Contains("diverged"));
  CHECK_THAT(launch_error([&] {
               xor_shuffle_kernel<<<1, 2048>>>(out.data());
             }),
             Catch::Contains("invalid block"));
  CHECK_THAT(launch_error([&] {
               xor_shuffle_kernel<<<dim3(1, 70000), 32>>>(out.data());
             }),
             Catch::Contains("invalid grid"));
}

TEST_CASE("dynamic shared memory starts as NaN") {
  std::vector<float> out(32, 0.0f);
  dynamic_shared_kernel<<<1, 32, 32 * sizeof(float)>>>(out.data());
  for (float v : out) CHECK(v != v);
}

}  // namespace
}  // namespace lattice::emu
