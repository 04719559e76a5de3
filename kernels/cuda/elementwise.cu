// CUDA twins of kernels/cpu/elementwise.cc, cast.cc and adamw.cc. Grid-stride loops with int64
// indices (n may exceed 2^31); reductions accumulate in double with a fixed grid and a fixed tree
// order, so a given n always gives the same bits (no atomics anywhere). The data-operand kernels
// load and store f32 or bf16 per operand (kernels/cuda/typed_access.cuh).
#include "kernels/cuda/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/adamw_coefficients.h"
#include "kernels/adamw_runs.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"
#include "kernels/ops.h"

namespace lattice::cuda {

namespace {

constexpr int kThreads = 256;
// Stage-1 blocks of a reduction: enough to fill an H100/H200 (132 SMs x 8 blocks), few enough that
// the second stage (one block) is cheap.
constexpr int kReduceBlocks = 1024;

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void fill_kernel(DataOut x, int64_t n, float value) {
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack];
#pragma unroll
    for (int k = 0; k < kPack; ++k) v[k] = value;
    store_pack(x, i, count, v);
  });
}

__global__ void scale_kernel(DataOut x, int64_t n, float alpha) {
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack] = {};
    load_pack(x, i, count, v);
#pragma unroll
    for (int k = 0; k < kPack; ++k) v[k] *= alpha;
    store_pack(x, i, count, v);
  });
}

__global__ void axpy_kernel(float alpha, DataIn x, DataOut y, int64_t n) {
  for_each_pack(n, [&](int64_t i, int count) {
    float xv[kPack] = {}, yv[kPack] = {};
    load_pack(x, i, count, xv);
    load_pack(y, i, count, yv);
#pragma unroll
    for (int k = 0; k < kPack; ++k) yv[k] = yv[k] + alpha * xv[k];
    store_pack(y, i, count, yv);
  });
}

// out may alias a or b (a pack is read whole before it is written).
__global__ void add_kernel(DataIn a, DataIn b, DataOut out, int64_t n) {
  for_each_pack(n, [&](int64_t i, int count) {
    float av[kPack] = {}, bv[kPack] = {};
    load_pack(a, i, count, av);
    load_pack(b, i, count, bv);
#pragma unroll
    for (int k = 0; k < kPack; ++k) av[k] = av[k] + bv[k];
    store_pack(out, i, count, av);
  });
}

// Sums the block's kThreads values of `shared` in a fixed tree; the result is in shared[0].
__device__ __forceinline__ void block_tree_sum(double* shared) {
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
}

// Stage 1: block b writes the double sum of its grid-stride share of x (squared if kSquare).
template <bool kSquare>
__global__ void __launch_bounds__(kThreads) reduce_partials_kernel(const float* x, int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double v = static_cast<double>(x[i]);
    acc += kSquare ? v * v : v;  // a float squared is exact in double
  }
  shared[threadIdx.x] = acc;
  block_tree_sum(shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = shared[0];
}

// Stage 2 (one block): *out = the sum of partials[0, count) in a fixed order.
__global__ void __launch_bounds__(kThreads) reduce_final_kernel(const double* partials, int count, double* out) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  shared[threadIdx.x] = acc;
  block_tree_sum(shared);
  if (threadIdx.x == 0) *out = shared[0];
}

template <bool kSquare>
void reduce_to(const float* x, int64_t n, double* out) {
  cudaStream_t stream = compute_stream();
  if (n <= 0) {
    LATTICE_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream));  // +0.0 is all zero bits
    return;
  }
  const unsigned blocks = std::min<unsigned>(grid_for(n, kThreads), kReduceBlocks);
  auto* partials = static_cast<double*>(allocate(sizeof(double) * blocks));
  reduce_partials_kernel<kSquare><<<blocks, kThreads, 0, stream>>>(x, n, partials);
  LATTICE_CUDA_LAUNCHED();
  reduce_final_kernel<<<1, kThreads, 0, stream>>>(partials, static_cast<int>(blocks), out);
  LATTICE_CUDA_LAUNCHED();
  release(partials);  // stream ordered: freed after the kernels ran
}

// y[r, c] += bias[c]. A pack may cross a row end: its column wraps to 0 there.
__global__ void add_bias_kernel(DataOut y, DataIn bias, int64_t rows, int64_t cols) {
  for_each_pack(rows * cols, [&](int64_t i, int count) {
    float v[kPack] = {};
    load_pack(y, i, count, v);
    int64_t c = i % cols;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) v[k] = v[k] + load(bias, c);
      c = c + 1 == cols ? 0 : c + 1;
    }
    store_pack(y, i, count, v);
  });
}

// bias_backward's per-row terms for kernels/cuda/column_sums.cuh: dy itself, summed in double.
struct BiasTerms {
  DataIn dy;
  int64_t cols;
  __device__ __forceinline__ void operator()(int64_t r, int64_t c, int count, double (&acc)[kPack][1]) const {
    float d[kPack] = {};
    load_pack(dy, r * cols + c, count, d);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) acc[k][0] += static_cast<double>(d[k]);
    }
  }
};

// The casts are copies through the packs' f32 values: load widens bf16 exactly, store rounds.
__global__ void cast_kernel(DataIn src, DataOut dst, int64_t n) {
  for_each_pack(n, [&](int64_t i, int count) {
    float v[kPack] = {};
    load_pack(src, i, count, v);
    store_pack(dst, i, count, v);
  });
}

// The per-call scalars of an AdamW step (kernels/adamw_coefficients.h), as kernel arguments.
struct AdamWScalars {
  float gs, b1, one_minus_b1, b2, one_minus_b2, eps, inv_sqrt_bc2, step_size;
};

AdamWScalars adamw_scalars(const ops::AdamWParams& p, const AdamWCoefficients& c) {
  return {p.grad_scale, p.beta1, c.one_minus_b1, p.beta2, c.one_minus_b2, p.eps, c.inv_sqrt_bc2, c.step_size};
}

// kernels/cpu/adamw.cc's adamw_loop for element i, the same float operations in the same order;
// both AdamW kernels below step through it. Every operation is an explicit round-to-nearest
// intrinsic, which ptxas never contracts into an FMA: with plain '*' and '-' it fused p's multiply
// and subtract one way in adamw_kernel and another in adamw_runs_kernel (where decay is a register,
// not a kernel argument), 1 ulp apart on about a quarter of the decayed elements. __fsqrt_rn and
// __fdiv_rn keep IEEE rounding even under --use_fast_math (the CPU uses std::sqrt and '/').
__device__ __forceinline__ float adamw_element(float* __restrict__ pw, const float* __restrict__ gw,
                                               float* __restrict__ mw, float* __restrict__ vw, int64_t i,
                                               const AdamWScalars& s, float decay) {
  const float g = __fmul_rn(gw[i], s.gs);
  const float m = __fadd_rn(__fmul_rn(s.b1, mw[i]), __fmul_rn(s.one_minus_b1, g));
  const float v = __fadd_rn(__fmul_rn(s.b2, vw[i]), __fmul_rn(__fmul_rn(s.one_minus_b2, g), g));
  mw[i] = m;
  vw[i] = v;
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), s.inv_sqrt_bc2), s.eps);
  const float p = __fsub_rn(__fmul_rn(pw[i], decay), __fmul_rn(s.step_size, __fdiv_rn(m, denom)));
  pw[i] = p;
  return p;
}

__global__ void adamw_kernel(float* __restrict__ pw, const float* __restrict__ gw, float* __restrict__ mw,
                             float* __restrict__ vw, int64_t n, AdamWScalars s, float decay) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) adamw_element(pw, gw, mw, vw, i, s, decay);
}

// Up to kAdamWRunsPerLaunch runs of the flat buffers, cut into tiles of kAdamWTile elements: run r
// has tiles [tile_begin[r], tile_begin[r + 1]). Passed by value (about 3.2 KB, within the 4 KB of
// kernel arguments every CUDA version takes), so a launch needs no device table.
constexpr int kAdamWRunsPerLaunch = 96;
constexpr int kAdamWPerThread = 4;
constexpr int64_t kAdamWTile = static_cast<int64_t>(kThreads) * kAdamWPerThread;

struct AdamWRunTable {
  int64_t offset[kAdamWRunsPerLaunch];       // of the values and moments
  int64_t grad_offset[kAdamWRunsPerLaunch];  // of the gradients and the copy (AdamWRun::grads_at)
  int64_t numel[kAdamWRunsPerLaunch];
  int64_t tile_begin[kAdamWRunsPerLaunch + 1];
  bool decay[kAdamWRunsPerLaunch];
  int count;
};

// Each block takes tiles in a grid-stride loop; a tile lies in one run (found by binary search over
// the table, the same for every thread), its elements kThreads apart for coalesced accesses. Runs
// with decay take `decay` (1 - lr·wd), the others 1: what adamw_kernel gets per run. copy (data may
// be null): the updated values, stored in copy's dtype at the gradients' indices. values_at_grads:
// the values are at the gradients' indices too (ValuesAt::kGradients), else at the moments'.
__global__ void __launch_bounds__(kThreads) adamw_runs_kernel(float* __restrict__ pw, const float* __restrict__ gw,
                                                             float* __restrict__ mw, float* __restrict__ vw,
                                                             const AdamWRunTable t, AdamWScalars s, float decay,
                                                             DataOut copy, bool values_at_grads) {
  const int64_t tiles = t.tile_begin[t.count];
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int lo = 0, hi = t.count - 1;  // the last run whose first tile is <= tile
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (t.tile_begin[mid] <= tile) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int64_t first = (tile - t.tile_begin[lo]) * kAdamWTile;
    const float run_decay = t.decay[lo] ? decay : 1.0f;
    const int64_t grad_shift = t.grad_offset[lo] - t.offset[lo];  // element i's gradient is at i + grad_shift
    float* const values = values_at_grads ? pw + grad_shift : pw;
#pragma unroll
    for (int k = 0; k < kAdamWPerThread; ++k) {
      const int64_t j = first + static_cast<int64_t>(k) * kThreads + threadIdx.x;
      if (j < t.numel[lo]) {
        const int64_t i = t.offset[lo] + j;
        const float p = adamw_element(values, gw + grad_shift, mw, vw, i, s, run_decay);
        if (copy.data != nullptr) store(copy, t.grad_offset[lo] + j, p);
      }
    }
  }
}

}  // namespace

void zero(void* data, int64_t bytes) {
  if (bytes <= 0) return;
  LATTICE_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), compute_stream()));
}

void copy(const void* src, void* dst, int64_t bytes) {
  if (src == dst || bytes <= 0) return;
  cudaStream_t stream = compute_stream();
  const auto s = reinterpret_cast<uintptr_t>(src), d = reinterpret_cast<uintptr_t>(dst);
  const auto b = static_cast<uintptr_t>(bytes);
  if (s < d + b && d < s + b) {
    // cudaMemcpy on overlapping ranges is undefined: stage through a temporary (memmove semantics).
    void* tmp = allocate(static_cast<size_t>(bytes));
    LATTICE_CUDA_CHECK(cudaMemcpyAsync(tmp, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
    LATTICE_CUDA_CHECK(cudaMemcpyAsync(dst, tmp, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
    release(tmp);
    return;
  }
  LATTICE_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
}

void fill(DataOut x, int64_t n, float value) {
  if (n <= 0) return;
  fill_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(x, n, value);
  LATTICE_CUDA_LAUNCHED();
}

void scale(DataOut x, int64_t n, float alpha) {
  if (n <= 0) return;
  scale_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(x, n, alpha);
  LATTICE_CUDA_LAUNCHED();
}

void fill_f32(float* x, int64_t n, float value) { fill(DataOut{x, false}, n, value); }
void scale_f32(float* x, int64_t n, float alpha) { scale(DataOut{x, false}, n, alpha); }

void axpy(float alpha, DataIn x, DataOut y, int64_t n) {
  if (n <= 0) return;
  axpy_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(alpha, x, y, n);
  LATTICE_CUDA_LAUNCHED();
}

void add(DataIn a, DataIn b, DataOut out, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(a, b, out, n);
  LATTICE_CUDA_LAUNCHED();
}

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  // The same kernel as sum_squares_to (ops.h: the same bits), read back through one device double.
  auto* slot = static_cast<double*>(allocate(sizeof(double)));
  double result = 0.0;
  try {
    reduce_to<true>(x, n, slot);
    copy_to_host(slot, &result, sizeof(double));  // synchronizes the compute stream
  } catch (...) {
    release(slot);
    throw;
  }
  release(slot);
  return result;
}

void sum_to(const float* x, int64_t n, double* out) { reduce_to<false>(x, n, out); }

void sum_squares_to(const float* x, int64_t n, double* out) { reduce_to<true>(x, n, out); }

void add_bias(DataOut y, DataIn bias, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  add_bias_kernel<<<pack_grid(rows * cols, kThreads), kThreads, 0, compute_stream()>>>(y, bias, rows, cols);
  LATTICE_CUDA_LAUNCHED();
}

void bias_backward(DataIn dy, DataOut dbias, int64_t rows, int64_t cols) {
  if (cols <= 0) return;
  column_sums<1>(BiasTerms{dy, cols}, std::max<int64_t>(rows, 0), cols, ColumnGrads<1>{{dbias}});
}

void bias_backward_group(const DataIn* dys, const DataOut* dbiases, int count, int64_t rows, int64_t cols) {
  if (cols <= 0) return;
  constexpr int kMaxProducts = 4;  // q, k, v
  for (int first = 0; first < count; first += kMaxProducts) {
    ColumnGroup<1, BiasTerms, kMaxProducts> group{};
    group.count = std::min(kMaxProducts, count - first);
    for (int i = 0; i < group.count; ++i) {
      group.terms[i] = BiasTerms{dys[first + i], cols};
      group.grads[i] = ColumnGrads<1>{{dbiases[first + i]}};
    }
    column_sums(group, std::max<int64_t>(rows, 0), cols);
  }
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  if (n <= 0) return;
  cast_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(DataIn{src, false}, DataOut{dst, true}, n);
  LATTICE_CUDA_LAUNCHED();
}

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  if (n <= 0) return;
  cast_kernel<<<pack_grid(n, kThreads), kThreads, 0, compute_stream()>>>(DataIn{src, true}, DataOut{dst, false}, n);
  LATTICE_CUDA_LAUNCHED();
}

void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const ops::AdamWParams& p) {
  if (n <= 0) return;
  const AdamWCoefficients c = adamw_coefficients(p);  // the CPU kernel's scalars
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(param, grad, exp_avg, exp_avg_sq, n,
                                                                          adamw_scalars(p, c), c.decay);
  LATTICE_CUDA_LAUNCHED();
}

void adamw_update_runs(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, const AdamWRun* runs,
                       size_t count, const ops::AdamWParams& p, DataOut copy, bool values_at_grads) {
  const AdamWCoefficients c = adamw_coefficients(p);  // c.decay: that of the runs with decay
  const AdamWScalars s = adamw_scalars(p, c);
  AdamWRunTable t{};
  auto launch = [&] {
    if (t.count == 0) return;
    const int64_t tiles = t.tile_begin[t.count];
    adamw_runs_kernel<<<grid_for(tiles * kThreads, kThreads), kThreads, 0, compute_stream()>>>(
        param, grad, exp_avg, exp_avg_sq, t, s, c.decay, copy, values_at_grads);
    LATTICE_CUDA_LAUNCHED();
    t = AdamWRunTable{};
  };
  for (size_t r = 0; r < count; ++r) {  // numel > 0 each (the Backend entry's contract)
    t.offset[t.count] = runs[r].offset;
    t.grad_offset[t.count] = runs[r].grads_at();
    t.numel[t.count] = runs[r].numel;
    t.decay[t.count] = runs[r].decay;
    t.tile_begin[t.count + 1] = t.tile_begin[t.count] + (runs[r].numel + kAdamWTile - 1) / kAdamWTile;
    if (++t.count == kAdamWRunsPerLaunch) launch();
  }
  launch();
}

}  // namespace lattice::cuda
