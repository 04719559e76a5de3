// CUDA LayerNorm and RMSNorm, written to round like kernels/cpu/norm.cc: row statistics in float,
// two-pass (mean, then the biased variance of x - mean), rstd = 1 / sqrt(var * (1/H) + eps) with
// IEEE sqrt and division, and every per-element expression spelled as the CPU spells it.
//
// Row work (forward, backward dx): one block per row, block sums in a fixed order (warp butterfly,
// then the warp totals summed in warp order), so results are deterministic. dgamma/dbeta: no atomics;
// the column sums of kernels/cuda/column_sums.cuh (fixed row chunks, then the chunks in order). Those
// cross-row sums run in double: they add up to 65536 terms, where float accumulation error would
// dominate the CPU comparison.
//
// x, gamma, beta, y and the gradients are f32 or bf16 each (kernels/cuda/typed_access.cuh); the row
// statistics are f32.
#include "kernels/cuda/norm.h"

#include <algorithm>

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {

namespace {

// Threads per row block: one per pack up to 512, a multiple of 32 (hidden 768: 96 threads).
int row_threads(int64_t hidden) {
  const int64_t packs = (hidden + kPack - 1) / kPack;
  return static_cast<int>(std::clamp<int64_t>((packs + 31) / 32 * 32, 32, 512));
}

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

// In-place safe (y == x): each y pack is written by the thread that reads that x pack, after the
// barriers that end the statistics passes.
__global__ void layernorm_forward_kernel(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean,
                                         float* rstd, int64_t rows, int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    float s = 0.0f, unused = 0.0f;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float xv[kPack] = {};
      load_pack(x, row + c, count, xv);
#pragma unroll
      for (int k = 0; k < kPack; ++k) s += xv[k];  // the zeros past count add nothing
    });
    block_sum2(s, unused, sh);
    const float m = s * inv_h;
    float v = 0.0f;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float xv[kPack] = {};
      load_pack(x, row + c, count, xv);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const float d = xv[k] - m;
        if (k < count) v += d * d;
      }
    });
    block_sum2(v, unused, sh);
    const float rs = 1.0f / sqrtf(v * inv_h + eps);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float xv[kPack] = {}, g[kPack] = {}, b[kPack] = {};
      load_pack(x, row + c, count, xv);
      load_pack(gamma, c, count, g);
      if (beta.data != nullptr) {
        load_pack(beta, c, count, b);
#pragma unroll
        for (int k = 0; k < kPack; ++k) xv[k] = (xv[k] - m) * rs * g[k] + b[k];
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) xv[k] = (xv[k] - m) * rs * g[k];
      }
      store_pack(y, row + c, count, xv);
    });
  }
}

__global__ void rmsnorm_forward_kernel(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows,
                                       int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    float ss = 0.0f, unused = 0.0f;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float xv[kPack] = {};
      load_pack(x, row + c, count, xv);
#pragma unroll
      for (int k = 0; k < kPack; ++k) ss += xv[k] * xv[k];
    });
    block_sum2(ss, unused, sh);
    const float rs = 1.0f / sqrtf(ss * inv_h + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float xv[kPack] = {}, g[kPack] = {};
      load_pack(x, row + c, count, xv);
      load_pack(gamma, c, count, g);
#pragma unroll
      for (int k = 0; k < kPack; ++k) xv[k] = xv[k] * rs * g[k];
      store_pack(y, row + c, count, xv);
    });
  }
}

// A backward pass's operands for the columns [c, c + count) of the row starting at element row.
__device__ __forceinline__ void load_backward_pack(DataIn dy, DataIn x, DataIn gamma, int64_t row, int64_t c,
                                                   int count, float (&d)[kPack], float (&xv)[kPack],
                                                   float (&gm)[kPack]) {
  load_pack(dy, row + c, count, d);
  load_pack(x, row + c, count, xv);
  load_pack(gamma, c, count, gm);
}

// dx's pack as stored, plus the residual path's gradient when there is one: the bits of the norm
// backward storing dx and ops::add(dx, residual, dx) after it, with one store and no second pass.
// __fadd_rn: in f32 stored_value is the identity, and ptxas could fuse a plain '+' with the multiply
// that made d[k], which the two-op sequence does not do.
__device__ __forceinline__ void add_residual(DataIn residual, DataOut dx, int64_t i, int count, float (&d)[kPack]) {
  if (residual.data == nullptr) return;
  float res[kPack] = {};
  load_pack(residual, i, count, res);
#pragma unroll
  for (int k = 0; k < kPack; ++k) d[k] = __fadd_rn(stored_value(dx, d[k]), res[k]);
}

// xhat = (x - mean) * rstd, g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// In-place safe (dx == dy) for the same reason as the forward.
__global__ void layernorm_backward_dx_kernel(DataIn dy, DataIn x, DataIn gamma, const float* mean,
                                             const float* rstd, DataIn residual, DataOut dx, int64_t rows,
                                             int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    const float m = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float d[kPack] = {}, xv[kPack] = {}, gm[kPack] = {};
      load_backward_pack(dy, x, gamma, row, c, count, d, xv, gm);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const float g = d[k] * gm[k];
        sum_g += g;
        sum_gx += g * (xv[k] - m) * rs;  // g is 0 past count
      }
    });
    block_sum2(sum_g, sum_gx, sh);
    const float mg = sum_g * inv_h, mgx = sum_gx * inv_h;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float d[kPack] = {}, xv[kPack] = {}, gm[kPack] = {};
      load_backward_pack(dy, x, gamma, row, c, count, d, xv, gm);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const float xhat = (xv[k] - m) * rs;
        d[k] = rs * (d[k] * gm[k] - mg - xhat * mgx);
      }
      add_residual(residual, dx, row + c, count, d);
      store_pack(dx, row + c, count, d);
    });
  }
}

// xhat = x * rstd, g = dy * gamma: dx = rstd * (g - xhat * mean(g * xhat)).
__global__ void rmsnorm_backward_dx_kernel(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataIn residual,
                                           DataOut dx, int64_t rows, int64_t hidden, float inv_h) {
  __shared__ float sh[64];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * hidden;
    const float rs = rstd[r];
    float sum_gx = 0.0f, unused = 0.0f;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float d[kPack] = {}, xv[kPack] = {}, gm[kPack] = {};
      load_backward_pack(dy, x, gamma, row, c, count, d, xv, gm);
#pragma unroll
      for (int k = 0; k < kPack; ++k) sum_gx += d[k] * gm[k] * xv[k] * rs;
    });
    block_sum2(sum_gx, unused, sh);
    const float mgx = sum_gx * inv_h;
    for_each_row_pack(hidden, [&](int64_t c, int count) {
      float d[kPack] = {}, xv[kPack] = {}, gm[kPack] = {};
      load_backward_pack(dy, x, gamma, row, c, count, d, xv, gm);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const float xhat = xv[k] * rs;
        d[k] = rs * (d[k] * gm[k] - xhat * mgx);
      }
      add_residual(residual, dx, row + c, count, d);
      store_pack(dx, row + c, count, d);
    });
  }
}

// The per-row terms of dgamma (dy * xhat) and, with kWithBeta, of dbeta (dy) for
// kernels/cuda/column_sums.cuh. mean null: RMSNorm, xhat = x * rstd (x - 0.0f == x exactly). Each
// term is the CPU's float product, summed in double.
template <bool kWithBeta>
struct NormParamTerms {
  DataIn dy, x;
  const float* mean;
  const float* rstd;
  int64_t hidden;
  __device__ __forceinline__ void operator()(int64_t r, int64_t c, int count,
                                             double (&acc)[kPack][kWithBeta ? 2 : 1]) const {
    float d[kPack] = {}, xv[kPack] = {};
    load_pack(dy, r * hidden + c, count, d);
    load_pack(x, r * hidden + c, count, xv);
    const float m = mean != nullptr ? mean[r] : 0.0f;
    const float rs = rstd[r];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (k < count) {
        const float xhat = (xv[k] - m) * rs;
        const float term = d[k] * xhat;
        acc[k][0] += static_cast<double>(term);
        if constexpr (kWithBeta) acc[k][1] += static_cast<double>(d[k]);
      }
    }
  }
};

// dgamma += sum_rows dy * xhat; dbeta (if its data is non-null) += sum_rows dy. rows, hidden > 0.
void norm_param_grads(DataIn dy, DataIn x, const float* mean, const float* rstd, DataOut dgamma, DataOut dbeta,
                      int64_t rows, int64_t hidden) {
  if (dbeta.data != nullptr) {
    column_sums<2>(NormParamTerms<true>{dy, x, mean, rstd, hidden}, rows, hidden, ColumnGrads<2>{{dgamma, dbeta}});
  } else {
    column_sums<1>(NormParamTerms<false>{dy, x, mean, rstd, hidden}, rows, hidden, ColumnGrads<1>{{dgamma}});
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

void layernorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* mean, const float* rstd, DataIn residual,
                        DataOut dx, DataOut dgamma, DataOut dbeta, int64_t rows, int64_t hidden) {
  if (rows <= 0 || hidden <= 0) return;
  const float inv_h = 1.0f / static_cast<float>(hidden);
  // Parameter gradients first: they read dy, which dx may alias.
  norm_param_grads(dy, x, mean, rstd, dgamma, dbeta, rows, hidden);
  const int threads = row_threads(hidden);
  layernorm_backward_dx_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(dy, x, gamma, mean, rstd,
                                                                                 residual, dx, rows, hidden, inv_h);
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

void rmsnorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataIn residual, DataOut dx,
                      DataOut dgamma, int64_t rows, int64_t hidden) {
  if (rows <= 0 || hidden <= 0) return;
  const float inv_h = 1.0f / static_cast<float>(hidden);
  norm_param_grads(dy, x, /*mean=*/nullptr, rstd, dgamma, /*dbeta=*/DataOut{nullptr, false}, rows, hidden);
  const int threads = row_threads(hidden);
  rmsnorm_backward_dx_kernel<<<row_grid(rows), threads, 0, compute_stream()>>>(dy, x, gamma, rstd, residual, dx,
                                                                               rows, hidden, inv_h);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace lattice::cuda
