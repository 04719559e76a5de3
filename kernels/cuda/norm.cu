// CUDA LayerNorm and RMSNorm, written to round like kernels/cpu/norm.cc: row statistics in float,
// two-pass (mean, then the biased variance of x - mean), rstd = 1 / sqrt(var * (1/H) + eps) with
// IEEE sqrt and division, and every per-element expression spelled as the CPU spells it.
//
// Row work (forward, backward dx): one block per row, block sums in a fixed order (warp butterfly,
// then the warp totals summed in warp order), so results are deterministic. dgamma/dbeta: no atomics;
// a column kernel sums fixed row chunks into per-chunk partials (scratch from the stream-ordered
// pool), then a second kernel adds the partials per column in chunk order. Those cross-row sums run
// in double: they add up to 65536 terms, where float accumulation error would dominate the CPU
// comparison.
//
// x, gamma, beta, y and the gradients are f32 or bf16 each (kernels/cuda/typed_access.cuh); the row
// statistics are f32.
#include "kernels/cuda/norm.h"

#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {

namespace {

constexpr int kParamTileCols = 32;   // columns per param-gradient block (one warp wide: coalesced)
constexpr int kParamRowLanes = 8;    // row lanes per param-gradient block
constexpr int kParamTargetBlocks = 2048;
constexpr int kFinishThreads = 256;

// Threads per row block: more for long rows; always a multiple of 32 and at most 1024.
int row_threads(int64_t hidden) { return hidden >= 4096 ? 512 : (hidden >= 1024 ? 256 : 128); }

// Rows are one block each; cap the grid (rows up to 65536 fit uncapped) and loop beyond it.
unsigned row_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Replaces a and b in every thread with their sums over the block (blockDim.x a multiple of 32).
// sh: 64 floats of shared memory. Every thread reads the warp totals in the same order, so all
// threads get bitwise the same result. The leading barrier lets sh be reused by consecutive calls.
__device__ __forceinline__ void block_sum2(float& a, float& b, float* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  a = warp_sum(a);
  b = warp_sum(b);
  __syncthreads();
  if (lane == 0) {
    sh[warp] = a;
    sh[32 + warp] = b;
  }
  __syncthreads();
  float ra = 0.0f, rb = 0.0f;
  for (int w = 0; w < warps; ++w) {
    ra += sh[w];
    rb += sh[32 + w];
  }
  a = ra;
  b = rb;
}

// In-place safe (y == x): each y[c] is written by the thread that last reads x[c], after the
// barriers that end the statistics passes.
__global__ void layernorm_forward_kernel(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean,
                                         float* rstd, int64_t rows, int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    float s = 0.0f, unused = 0.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) s += load(x, row + c);
    block_sum2(s, unused, sh);
    const float m = s * inv_h;
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      const float d = load(x, row + c) - m;
      v += d * d;
    }
    block_sum2(v, unused, sh);
    const float rs = 1.0f / sqrtf(v * inv_h + eps);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    if (beta.data != nullptr) {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
        store(y, row + c, (load(x, row + c) - m) * rs * load(gamma, c) + load(beta, c));
      }
    } else {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
        store(y, row + c, (load(x, row + c) - m) * rs * load(gamma, c));
      }
    }
  }
}

__global__ void rmsnorm_forward_kernel(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows,
                                       int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    float ss = 0.0f, unused = 0.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      const float v = load(x, row + c);
      ss += v * v;
    }
    block_sum2(ss, unused, sh);
    const float rs = 1.0f / sqrtf(ss * inv_h + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      store(y, row + c, load(x, row + c) * rs * load(gamma, c));
    }
  }
}

// xhat = (x - mean) * rstd, g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// In-place safe (dx == dy) for the same reason as the forward.
__global__ void layernorm_backward_dx_kernel(DataIn dy, DataIn x, DataIn gamma, const float* mean,
                                             const float* rstd, DataOut dx, int64_t rows, int64_t hidden,
                                             float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    const float m = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      const float g = load(dy, row + c) * load(gamma, c);
      sum_g += g;
      sum_gx += g * (load(x, row + c) - m) * rs;
    }
    block_sum2(sum_g, sum_gx, sh);
    const float mg = sum_g * inv_h, mgx = sum_gx * inv_h;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      const float xhat = (load(x, row + c) - m) * rs;
      store(dx, row + c, rs * (load(dy, row + c) * load(gamma, c) - mg - xhat * mgx));
    }
  }
}

// xhat = x * rstd, g = dy * gamma: dx = rstd * (g - xhat * mean(g * xhat)).
__global__ void rmsnorm_backward_dx_kernel(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataOut dx,
                                           int64_t rows, int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    const float rs = rstd[r];
    float sum_gx = 0.0f, unused = 0.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      sum_gx += load(dy, row + c) * load(gamma, c) * load(x, row + c) * rs;
    }
    block_sum2(sum_gx, unused, sh);
    const float mgx = sum_gx * inv_h;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      const float xhat = load(x, row + c) * rs;
      store(dx, row + c, rs * (load(dy, row + c) * load(gamma, c) - xhat * mgx));
    }
  }
}

// Block (32, 8) at (column tile blockIdx.x, row chunk blockIdx.y): pg[chunk, c] = sum over the
// chunk's rows of dy * xhat, pb[chunk, c] = sum of dy (pb may be null). mean null: RMSNorm,
// xhat = x * rstd (x - 0.0f == x exactly). Each term is the CPU's float product; sums in double,
// each lane over its rows in order, then the 8 lanes in order.
__global__ void norm_param_partials_kernel(DataIn dy, DataIn x, const float* mean, const float* rstd, int64_t rows,
                                           int64_t hidden, int64_t rows_per_chunk, double* pg, double* pb) {
  __shared__ double sg[kParamRowLanes][kParamTileCols];
  __shared__ double sb[kParamRowLanes][kParamTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kParamTileCols + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  double ag = 0.0, ab = 0.0;
  if (c < hidden) {
    for (int64_t r = r0 + ty; r < r1; r += kParamRowLanes) {
      const float d = load(dy, r * hidden + c);
      const float m = mean != nullptr ? mean[r] : 0.0f;
      const float xhat = (load(x, r * hidden + c) - m) * rstd[r];
      const float term = d * xhat;
      ag += static_cast<double>(term);
      ab += static_cast<double>(d);
    }
  }
  sg[ty][tx] = ag;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && c < hidden) {
    double tg = 0.0, tb = 0.0;
    for (int k = 0; k < kParamRowLanes; ++k) {
      tg += sg[k][tx];
      tb += sb[k][tx];
    }
    pg[static_cast<int64_t>(blockIdx.y) * hidden + c] = tg;
    if (pb != nullptr) pb[static_cast<int64_t>(blockIdx.y) * hidden + c] = tb;
  }
}

// grad[c] += sum over chunks (in order) of partial[chunk, c].
__global__ void norm_param_finish_kernel(const double* partial, int64_t chunks, int64_t hidden, DataOut grad) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < hidden;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * hidden + c];
    store(grad, c, load(grad, c) + static_cast<float>(s));
  }
}

// Pool scratch released in stream order when the host function returns (release never throws).
struct Scratch {
  void* ptr;
  explicit Scratch(size_t bytes) : ptr(allocate(bytes)) {}
  ~Scratch() { release(ptr); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// dgamma += sum_rows dy * xhat; dbeta (if its data is non-null) += sum_rows dy. rows, hidden > 0.
void norm_param_grads(DataIn dy, DataIn x, const float* mean, const float* rstd, DataOut dgamma, DataOut dbeta,
                      int64_t rows, int64_t hidden) {
  const int64_t col_tiles = (hidden + kParamTileCols - 1) / kParamTileCols;
  // Enough row chunks for ~kParamTargetBlocks blocks, each chunk at least one row per lane.
  int64_t chunks = std::max<int64_t>(1, kParamTargetBlocks / col_tiles);
  chunks = std::min<int64_t>(chunks, (rows + kParamRowLanes - 1) / kParamRowLanes);
  chunks = std::clamp<int64_t>(chunks, 1, 65535);  // gridDim.y limit
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const bool with_beta = dbeta.data != nullptr;
  const int planes = with_beta ? 2 : 1;
  Scratch scratch(static_cast<size_t>(planes) * static_cast<size_t>(chunks * hidden) * sizeof(double));
  double* pg = static_cast<double*>(scratch.ptr);
  double* pb = with_beta ? pg + chunks * hidden : nullptr;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
  const dim3 block(kParamTileCols, kParamRowLanes);
  norm_param_partials_kernel<<<grid, block, 0, compute_stream()>>>(dy, x, mean, rstd, rows, hidden, rows_per_chunk,
                                                                   pg, pb);
  LATTICE_CUDA_LAUNCHED();
  norm_param_finish_kernel<<<grid_for(hidden, kFinishThreads), kFinishThreads, 0, compute_stream()>>>(
      pg, chunks, hidden, dgamma);
  LATTICE_CUDA_LAUNCHED();
  if (with_beta) {
    norm_param_finish_kernel<<<grid_for(hidden, kFinishThreads), kFinishThreads, 0, compute_stream()>>>(
        pb, chunks, hidden, dbeta);
    LATTICE_CUDA_LAUNCHED();
  }
}

}  // namespace

void layernorm_forward(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean, float* rstd,
                       int64_t rows, int64_t hidden) {
  if (rows <= 0) return;
  // hidden == 0 still writes mean/rstd (NaN, as 0 * inf on the CPU).
  const float inv_h = 1.0f / static_cast<float>(hidden);
  const int threads = row_threads(hidden);
  layernorm_forward_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(x, gamma, beta, eps, y, mean, rstd,
                                                                             rows, hidden, inv_h);
  LATTICE_CUDA_LAUNCHED();
}

void layernorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* mean, const float* rstd, DataOut dx,
                        DataOut dgamma, DataOut dbeta, int64_t rows, int64_t hidden) {
  if (rows <= 0 || hidden <= 0) return;
  const float inv_h = 1.0f / static_cast<float>(hidden);
  // Parameter gradients first: they read dy, which dx may alias.
  norm_param_grads(dy, x, mean, rstd, dgamma, dbeta, rows, hidden);
  const int threads = row_threads(hidden);
  layernorm_backward_dx_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(dy, x, gamma, mean, rstd, dx,
                                                                                 rows, hidden, inv_h);
  LATTICE_CUDA_LAUNCHED();
}

void rmsnorm_forward(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows, int64_t hidden) {
  if (rows <= 0) return;
  const float inv_h = 1.0f / static_cast<float>(hidden);
  const int threads = row_threads(hidden);
  rmsnorm_forward_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(x, gamma, eps, y, rstd, rows, hidden,
                                                                           inv_h);
  LATTICE_CUDA_LAUNCHED();
}

void rmsnorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataOut dx, DataOut dgamma,
                      int64_t rows, int64_t hidden) {
  if (rows <= 0 || hidden <= 0) return;
  const float inv_h = 1.0f / static_cast<float>(hidden);
  norm_param_grads(dy, x, /*mean=*/nullptr, rstd, dgamma, /*dbeta=*/DataOut{nullptr, false}, rows, hidden);
  const int threads = row_threads(hidden);
  rmsnorm_backward_dx_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(dy, x, gamma, rstd, dx, rows,
                                                                               hidden, inv_h);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace lattice::cuda
