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

// Many warp collectives in a row, each reading what the one before wrote: a lane that overwrote its
// exchange slot before another lane had read it would change the result.
constexpr int kChainSteps = 12;
__global__ void collective_chain_kernel(unsigned* out) {
  unsigned v = threadIdx.x + 7 * blockIdx.x;
  for (int i = 0; i < kChainSteps; ++i) {
    v = v * 3u + __shfl_xor_sync(0xffffffffu, v, 1 << (i % 5));
    v += static_cast<unsigned>(__builtin_popcount(__ballot_sync(0xffffffffu, v % 2 == 1)));
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// What collective_chain_kernel computes, one warp at a time on the host.
std::vector<unsigned> collective_chain_reference(int blocks, int threads) {
  std::vector<unsigned> out(static_cast<size_t>(blocks * threads));
  for (int b = 0; b < blocks; ++b) {
    for (int w0 = 0; w0 < threads; w0 += 32) {
      std::vector<unsigned> v(32);
      for (int l = 0; l < 32; ++l) v[l] = static_cast<unsigned>(w0 + l + 7 * b);
      for (int i = 0; i < kChainSteps; ++i) {
        std::vector<unsigned> next(32);
        for (int l = 0; l < 32; ++l) next[l] = v[l] * 3u + v[l ^ (1 << (i % 5))];
        int odd = 0;
        for (unsigned x : next) odd += x % 2 == 1;
        for (int l = 0; l < 32; ++l) v[l] = next[l] + static_cast<unsigned>(odd);
      }
      for (int l = 0; l < 32; ++l) out[static_cast<size_t>(b * threads + w0 + l)] = v[l];
    }
  }
  return out;
}

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

TEST_CASE("a chain of shuffles and ballots reads what each lane wrote at each step") {
  std::vector<unsigned> out(3 * 64);
  collective_chain_kernel<<<3, 64>>>(out.data());  // block 1 runs its threads in reverse order
  CHECK(out == collective_chain_reference(3, 64));
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

TEST_CASE("a launch after one that failed mid-block runs every thread afresh") {
  // The failed launch leaves its fibers stopped at a shuffle and at __syncthreads.
  std::vector<float> out(64);
  CHECK_THAT(launch_error([&] { split_warp_kernel<<<1, 32>>>(out.data()); }), Catch::Contains("diverged"));
  std::vector<unsigned> chain(2 * 64);
  collective_chain_kernel<<<2, 64>>>(chain.data());
  CHECK(chain == collective_chain_reference(2, 64));
  std::vector<int> sums(2 * 256, -1);
  block_sum_kernel<<<2, 256>>>(sums.data(), true);
  for (int v : sums) REQUIRE(v == 255 * 256 / 2);
}

TEST_CASE("dynamic shared memory starts as NaN") {
  std::vector<float> out(32, 0.0f);
  dynamic_shared_kernel<<<1, 32, 32 * sizeof(float)>>>(out.data());
  for (float v : out) CHECK(v != v);
}

}  // namespace
}  // namespace lattice::emu
