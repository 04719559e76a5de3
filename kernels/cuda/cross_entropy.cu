// CUDA softmax cross-entropy: the twin of kernels/cpu/cross_entropy.cc.
// Math as the CPU's: max by `x > m ? x : m` (NaNs never win, -inf start), float sum of
// exp(x - m), lse = m + log(sum), grad = exp(x - lse) * grad_scale, then -grad_scale at the
// target. expf/logf are the accurate (non-intrinsic) versions; the CPU's fast_exp is ~2 ulp too.
// The whole-vocabulary forward reads each row once (an online softmax, as flash attention's: each
// thread keeps its running max and rescales its sum when the max grows), where the CPU reads it
// twice; the sums agree to rounding. Reductions are per-thread strided partials then a fixed
// warp-shuffle tree: deterministic, no atomics. Logits and their gradient are f32 or bf16 each
// (kernels/cuda/typed_access.cuh); the statistics and losses are f32.
#include "kernels/cuda/cross_entropy.h"

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {
namespace {

// Threads per row block of the shard kernels: a multiple of 32 and at most 1024, so at most 32 warp
// partials.
constexpr int kRowThreads = 512;
// Threads per block of the (elementwise) backward, and packs each thread covers at most before
// another column-chunk block is added.
constexpr int kBwdThreads = 256;
constexpr int kBwdPacksPerThread = 2;

// The CPU's max step, exactly (a NaN x never replaces m).
__device__ __forceinline__ float max_step(float m, float x) { return x > m ? x : m; }

// Reduces one float per thread over the block; every thread gets the same result. smem holds 32
// floats. The leading __syncthreads lets callers reuse smem for back-to-back reductions.
// The xor butterfly gives bitwise identical values on all lanes (each step adds/maxes the same
// pair, just commuted), and the tree is fixed, so the result is run-to-run deterministic.
template <bool kMax>
__device__ float block_reduce(float v, float* smem) {
  const float identity = kMax ? -INFINITY : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? max_step(v, other) : v + other;
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  __syncthreads();  // smem may still be read by an earlier reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? max_step(v, other) : v + other;
  }
  return v;
}

// max over x[row, row + n) (-inf when n == 0), on every thread.
__device__ float row_max(DataIn x, int64_t row, int64_t n, float* smem) {
  float m = -INFINITY;
  for_each_row_pack(n, [&](int64_t c, int count) {
    float v[kPack] = {};
    load_pack(x, row + c, count, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) m = max_step(m, v[k]);
    }
  });
  return block_reduce<true>(m, smem);
}

// sum over x[row, row + n) of exp(x - m) in float (as the CPU), on every thread; each thread adds
// its packs' terms in element order.
__device__ float row_sum_exp(DataIn x, int64_t row, int64_t n, float m, float* smem) {
  float s = 0.0f;
  for_each_row_pack(n, [&](int64_t c, int count) {
    float v[kPack] = {};
    load_pack(x, row + c, count, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) s += expf(v[k] - m);
    }
  });
  return block_reduce<false>(s, smem);
}

// logsumexp of x[row, row + n) in one read (n > 0), on every thread. Each thread runs an online
// softmax over its packs in order: at a pack whose max exceeds the running max m, the sum so far is
// rescaled by exp(m_old - m) first. The block then takes the max of the threads' maxes and adds
// their sums rescaled to it (a thread without elements, or whose sum is 0, adds nothing).
__device__ float row_logsumexp(DataIn x, int64_t row, int64_t n, float* smem) {
  float m = -INFINITY, s = 0.0f;
  for_each_row_pack(n, [&](int64_t c, int count) {
    float v[kPack] = {};
    load_pack(x, row + c, count, v);
    float pack_max = m;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) pack_max = max_step(pack_max, v[k]);
    }
    if (pack_max > m) {
      s = s == 0.0f ? 0.0f : s * expf(m - pack_max);
      m = pack_max;
    }
    // While every element so far is -inf (a masked logit), each term is exp(-inf) = 0, not
    // exp(-inf - -inf) = NaN.
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count && m != -INFINITY) s += expf(v[k] - m);
    }
  });
  const float row_m = block_reduce<true>(m, smem);
  const float scaled = s == 0.0f ? 0.0f : s * expf(m - row_m);
  return row_m + logf(block_reduce<false>(scaled, smem));
}

// Threads per row block of the whole-vocabulary forward and the fused classifier: the same in both,
// so that they sum each row in the same order (the same lse bits). 1024 because the fused kernel's
// gradient pass re-reads its row, meant to come from L2: with at most two rows per SM in flight
// (bf16 GPT-2: ~26 MB in all), they fit the H200's 50 MB L2 between the two reads (not yet
// measured on a GPU).
constexpr int kLogsumexpThreads = 1024;

// One block per row. Only reads logits, so no aliasing concerns.
__global__ void __launch_bounds__(kLogsumexpThreads)
    forward_kernel(DataIn logits, const int32_t* __restrict__ targets, float* __restrict__ losses,
                   float* __restrict__ lse, int64_t vocab) {
  __shared__ float smem[32];
  const int64_t r = blockIdx.x;
  const int64_t row = r * vocab;
  const float l = row_logsumexp(logits, row, vocab, smem);
  if (threadIdx.x == 0) {
    lse[r] = l;
    losses[r] = l - load(logits, row + targets[r]);
  }
}

// dlogits[row, row + n) = (exp(x - l) - onehot(t)) * grad_scale over this thread's packs of the
// row (t: the target's column, or outside [0, valid) for none), 0 from column `valid` on. A thread
// reads each element before writing it itself, so dlogits may alias x.
__device__ __forceinline__ void row_gradient(DataIn x, DataOut d, int64_t row, int64_t n, int64_t valid, int64_t t,
                                             float l, float grad_scale, int64_t first_pack, int64_t pack_stride) {
  for (int64_t p = first_pack; p * kPack < n; p += pack_stride) {
    const int64_t j0 = p * kPack;
    const int count = pack_count(p, n);
    float v[kPack] = {};
    load_pack(x, row + j0, count, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const int64_t j = j0 + k;
      if (j < valid) {
        v[k] = expf(v[k] - l) * grad_scale;
        if (j == t) v[k] -= grad_scale;  // same two roundings as the CPU's d[t] -= grad_scale
      } else {
        v[k] = 0.0f;  // padding columns: no gradient
      }
    }
    store_pack(d, row + j0, count, v);
  }
}

// Training's fused classifier (llm.c's): one block per row computes the row's lse and loss, then
// overwrites the row with its gradient, the bits of forward_kernel followed by the backward. The
// row is read from HBM once and re-read from L2. The target's logit is read before the barriers
// inside the reductions, so before any thread overwrites it.
__global__ void __launch_bounds__(kLogsumexpThreads)
    forward_backward_kernel(DataIn logits, const int32_t* __restrict__ targets, float grad_scale,
                            float* __restrict__ losses, float* __restrict__ lse, DataOut dlogits, int64_t vocab) {
  __shared__ float smem[32];
  const int64_t r = blockIdx.x;
  const int64_t row = r * vocab;
  const int64_t t = targets[r];
  const float target_logit = threadIdx.x == 0 ? load(logits, row + t) : 0.0f;
  const float l = row_logsumexp(logits, row, vocab, smem);
  if (threadIdx.x == 0) {
    lse[r] = l;
    losses[r] = l - target_logit;
  }
  row_gradient(logits, dlogits, row, vocab, vocab, t, l, grad_scale, threadIdx.x, blockDim.x);
}

__global__ void shard_max_kernel(DataIn logits, float* __restrict__ out, int64_t cols, int64_t valid) {
  __shared__ float smem[32];
  const int64_t r = blockIdx.x;
  const float m = row_max(logits, r * cols, valid, smem);
  if (threadIdx.x == 0) out[r] = m;
}

__global__ void shard_sums_kernel(DataIn logits, const int32_t* __restrict__ targets,
                                  const float* __restrict__ row_max_in, float* __restrict__ sum_exp,
                                  float* __restrict__ target_logit, int64_t cols, int64_t first_col,
                                  int64_t valid) {
  __shared__ float smem[32];
  const int64_t r = blockIdx.x;
  const int64_t row = r * cols;
  const float s = row_sum_exp(logits, row, valid, row_max_in[r], smem);
  if (threadIdx.x == 0) {
    sum_exp[r] = s;
    const int64_t t = static_cast<int64_t>(targets[r]) - first_col;
    target_logit[r] = t >= 0 && t < valid ? load(logits, row + t) : 0.0f;
  }
}

// Elementwise per row; a thread reads x[j] and writes d[j] itself (the target correction included),
// so d == x needs no barrier (logits and dlogits may alias).
__global__ void shard_backward_kernel(DataIn logits, const int32_t* __restrict__ targets,
                                      const float* __restrict__ lse, float grad_scale, DataOut dlogits,
                                      int64_t cols, int64_t first_col, int64_t valid) {
  const int64_t r = blockIdx.x;
  row_gradient(logits, dlogits, r * cols, cols, valid, static_cast<int64_t>(targets[r]) - first_col, lse[r],
               grad_scale, static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x,
               static_cast<int64_t>(gridDim.y) * blockDim.x);
}

__global__ void shard_loss_kernel(const float* __restrict__ row_max_in, const float* __restrict__ sum_exp,
                                  const float* __restrict__ target_logit, float* __restrict__ losses,
                                  float* __restrict__ lse, int64_t rows) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const float l = row_max_in[r] + logf(sum_exp[r]);
    lse[r] = l;
    losses[r] = l - target_logit[r];
  }
}

void launch_shard_backward(DataIn logits, const int32_t* targets, const float* lse, float grad_scale,
                           DataOut dlogits, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
  if (rows <= 0) return;
  // Rows on x (up to 2^31-1 blocks); column chunks on y so a few long rows still fill the GPU.
  const int64_t cols_per_block = int64_t{kBwdThreads} * kPack * kBwdPacksPerThread;
  int64_t chunks = (cols + cols_per_block - 1) / cols_per_block;
  chunks = chunks < 1 ? 1 : (chunks > 65535 ? 65535 : chunks);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(chunks));
  shard_backward_kernel<<<grid, kBwdThreads, 0, compute_stream()>>>(logits, targets, lse, grad_scale, dlogits, cols,
                                                                    first_col, valid);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace

void cross_entropy_forward(DataIn logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                           int64_t vocab) {
  if (rows <= 0) return;
  forward_kernel<<<static_cast<unsigned>(rows), kLogsumexpThreads, 0, compute_stream()>>>(logits, targets, losses,
                                                                                          lse, vocab);
  LATTICE_CUDA_LAUNCHED();
}

void cross_entropy_forward_backward(DataIn logits, const int32_t* targets, float grad_scale, float* losses, float* lse,
                                    DataOut dlogits, int64_t rows, int64_t vocab) {
  if (rows <= 0) return;
  forward_backward_kernel<<<static_cast<unsigned>(rows), kLogsumexpThreads, 0, compute_stream()>>>(
      logits, targets, grad_scale, losses, lse, dlogits, vocab);
  LATTICE_CUDA_LAUNCHED();
}

void cross_entropy_shard_max(DataIn logits, float* row_max, int64_t rows, int64_t cols, int64_t valid) {
  if (rows <= 0) return;
  shard_max_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, compute_stream()>>>(logits, row_max, cols, valid);
  LATTICE_CUDA_LAUNCHED();
}

void cross_entropy_shard_sums(DataIn logits, const int32_t* targets, const float* row_max, float* sum_exp,
                              float* target_logit, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
  if (rows <= 0) return;
  shard_sums_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, compute_stream()>>>(
      logits, targets, row_max, sum_exp, target_logit, cols, first_col, valid);
  LATTICE_CUDA_LAUNCHED();
}

void cross_entropy_shard_loss(const float* row_max, const float* sum_exp, const float* target_logit, float* losses,
                              float* lse, int64_t rows) {
  if (rows <= 0) return;
  constexpr int kThreads = 256;
  shard_loss_kernel<<<grid_for(rows, kThreads), kThreads, 0, compute_stream()>>>(row_max, sum_exp, target_logit,
                                                                                 losses, lse, rows);
  LATTICE_CUDA_LAUNCHED();
}

void cross_entropy_shard_backward(DataIn logits, const int32_t* targets, const float* lse, float grad_scale,
                                  DataOut dlogits, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
  launch_shard_backward(logits, targets, lse, grad_scale, dlogits, rows, cols, first_col, valid);
}

}  // namespace lattice::cuda
