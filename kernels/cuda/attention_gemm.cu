// Attention through batched GEMMs (see attention_gemm.h). One call of the GEMMs covers, for one
// batch row b and one position i inside the GQA groups, the q heads h = j·g + i of the kv heads j of
// a chunk: in the [B, T, H, D] layouts those heads are g·D (q) and D (k, v) elements apart, so a
// strided batch over j reads them in place, without transposes.
#include "kernels/cuda/attention_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"

namespace lattice::cuda {

namespace {

constexpr int kRowThreads = 256;

// Block-wide reduction of one value per thread (kRowThreads threads); every thread gets the result.
template <class Op>
__device__ float block_reduce(float v, float* shared, Op op) {
  for (int w = 16; w > 0; w >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, w));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int i = 1; i < kRowThreads / 32; ++i) v = op(v, shared[i]);
  return v;
}

// Rows of nb score matrices [T, T] (row r of matrix jj at s + (jj·T + r)·T), already scaled: the
// causal softmax in place (columns > r become 0) and lse[lse_base + jj·lse_stride + r] = max + log(sum).
__global__ void causal_softmax_kernel(float* __restrict__ s, float* __restrict__ lse, int T, int64_t lse_base,
                                      int64_t lse_stride) {
  __shared__ float shared[kRowThreads / 32];
  const int64_t row = blockIdx.x;  // jj·T + r
  const int r = static_cast<int>(row % T);
  const int64_t jj = row / T;
  float* p = s + row * T;
  float m = -INFINITY;
  for (int c = threadIdx.x; c <= r; c += kRowThreads) m = fmaxf(m, p[c]);
  m = block_reduce(m, shared, [](float a, float b) { return fmaxf(a, b); });
  float sum = 0.0f;
  for (int c = threadIdx.x; c <= r; c += kRowThreads) sum += expf(p[c] - m);
  sum = block_reduce(sum, shared, [](float a, float b) { return a + b; });
  const float row_lse = m + logf(sum);
  for (int c = threadIdx.x; c < T; c += kRowThreads) p[c] = c <= r ? expf(p[c] - row_lse) : 0.0f;
  if (threadIdx.x == 0) lse[lse_base + jj * lse_stride + r] = row_lse;
}

// The backward's elementwise step, for nb matrices: a holds the scaled scores S, b holds dP = dO Vᵀ.
// a becomes P = exp(S − lse) (0 above the diagonal), b becomes dS = P ∘ (dP − dvec).
__global__ void causal_p_ds_kernel(float* __restrict__ a, float* __restrict__ b, const float* __restrict__ lse,
                                   const float* __restrict__ dvec, int T, int64_t rows, int64_t row_base,
                                   int64_t row_stride) {
  const int64_t n = rows * T;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = e / T;
    const int c = static_cast<int>(e % T), r = static_cast<int>(row % T);
    const int64_t stat = row_base + (row / T) * row_stride + r;
    const float p = c <= r ? expf(a[e] - lse[stat]) : 0.0f;
    a[e] = p;
    b[e] = p * (b[e] - dvec[stat]);
  }
}

struct Dims {
  int64_t B, T, Hq, Hkv, D, g;
  float scale;
  int64_t chunk;  // kv heads per GEMM batch
};

Dims dims(const AttentionShape& s) {
  Dims d{s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, s.q_heads / s.kv_heads,
         1.0f / std::sqrt(static_cast<float>(s.head_dim)), 1};
  d.chunk = attention_gemm_chunk(s);  // its scratch is kernels/cuda_workspace.h's budget
  return d;
}

// Offsets of batch row b, group position i, first kv head j0 in the [B, T, H, D] tensors, and of the
// (b, h = j0·g + i) row block of the [B, Hq, T] statistics.
int64_t q_offset(const Dims& d, int64_t b, int64_t i, int64_t j0) { return b * d.T * d.Hq * d.D + (j0 * d.g + i) * d.D; }
int64_t kv_offset(const Dims& d, int64_t b, int64_t j0) { return b * d.T * d.Hkv * d.D + j0 * d.D; }
int64_t stat_offset(const Dims& d, int64_t b, int64_t i, int64_t j0) { return (b * d.Hq + j0 * d.g + i) * d.T; }

// Releases a pool allocation when the scope ends (stream ordered), also on an exception.
struct Scratch {
  float* p;
  explicit Scratch(int64_t floats) : p(static_cast<float*>(allocate(sizeof(float) * static_cast<size_t>(floats)))) {}
  ~Scratch() { release(p); }
};

}  // namespace

void attention_forward_gemm(const float* q, const float* k, const float* v, float* out, float* lse,
                            const AttentionShape& s) {
  if (s.batch == 0 || s.seq == 0 || s.q_heads == 0) return;
  const Dims d = dims(s);
  const int64_t TT = d.T * d.T;
  Scratch scores(d.chunk * TT);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t i = 0; i < d.g; ++i) {
      for (int64_t j0 = 0; j0 < d.Hkv; j0 += d.chunk) {
        const int64_t nj = std::min(d.chunk, d.Hkv - j0);
        // S_j = scale · Q_h K_jᵀ   ([T, D] × [D, T] per kv head j of the chunk)
        sgemm_strided_batched(false, true, d.T, d.T, d.D, d.scale, q + q_offset(d, b, i, j0), d.Hq * d.D, d.g * d.D,
                              k + kv_offset(d, b, j0), d.Hkv * d.D, d.D, 0.0f, scores.p, d.T, TT, nj);
        causal_softmax_kernel<<<static_cast<unsigned>(nj * d.T), kRowThreads, 0, compute_stream()>>>(
            scores.p, lse, static_cast<int>(d.T), stat_offset(d, b, i, j0), d.g * d.T);
        LATTICE_CUDA_LAUNCHED();
        // O_h = P_j V_j
        sgemm_strided_batched(false, false, d.T, d.D, d.T, 1.0f, scores.p, d.T, TT, v + kv_offset(d, b, j0),
                              d.Hkv * d.D, d.D, 0.0f, out + q_offset(d, b, i, j0), d.Hq * d.D, d.g * d.D, nj);
      }
    }
  }
}

void attention_backward_gemm(const float* dout, const float* q, const float* k, const float* v, const float* out,
                             const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s) {
  if (s.batch == 0 || s.seq == 0) return;
  if (s.q_heads == 0) {  // no q head reads k / v: their gradients are 0
    const size_t bytes = sizeof(float) * static_cast<size_t>(s.batch * s.seq * s.kv_heads * s.head_dim);
    LATTICE_CUDA_CHECK(cudaMemsetAsync(dk, 0, bytes, compute_stream()));
    LATTICE_CUDA_CHECK(cudaMemsetAsync(dv, 0, bytes, compute_stream()));
    return;
  }
  const Dims d = dims(s);
  const int64_t TT = d.T * d.T;
  Scratch dvec(d.B * d.Hq * d.T);
  attention_dvec(dout, out, dvec.p, s);
  Scratch p_buf(d.chunk * TT), ds_buf(d.chunk * TT);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t i = 0; i < d.g; ++i) {
      // dK, dV of a kv head sum over its group's q heads i = 0..g-1, in that order.
      const float accumulate = i == 0 ? 0.0f : 1.0f;
      for (int64_t j0 = 0; j0 < d.Hkv; j0 += d.chunk) {
        const int64_t nj = std::min(d.chunk, d.Hkv - j0);
        const float* q_h = q + q_offset(d, b, i, j0);
        const float* do_h = dout + q_offset(d, b, i, j0);
        const float* k_j = k + kv_offset(d, b, j0);
        const float* v_j = v + kv_offset(d, b, j0);
        const int64_t ldq = d.Hq * d.D, sq = d.g * d.D, ldkv = d.Hkv * d.D, skv = d.D;
        // S = scale · Q Kᵀ and dP = dO Vᵀ, then P and dS = P ∘ (dP − dvec) in place.
        sgemm_strided_batched(false, true, d.T, d.T, d.D, d.scale, q_h, ldq, sq, k_j, ldkv, skv, 0.0f, p_buf.p, d.T,
                              TT, nj);
        sgemm_strided_batched(false, true, d.T, d.T, d.D, 1.0f, do_h, ldq, sq, v_j, ldkv, skv, 0.0f, ds_buf.p, d.T,
                              TT, nj);
        constexpr int kThreads = 256;
        causal_p_ds_kernel<<<grid_for(nj * TT, kThreads), kThreads, 0, compute_stream()>>>(
            p_buf.p, ds_buf.p, lse, dvec.p, static_cast<int>(d.T), nj * d.T, stat_offset(d, b, i, j0), d.g * d.T);
        LATTICE_CUDA_LAUNCHED();
        // dV_j (+)= Pᵀ dO,  dQ_h = scale · dS K_j,  dK_j (+)= scale · dSᵀ Q_h
        sgemm_strided_batched(true, false, d.T, d.D, d.T, 1.0f, p_buf.p, d.T, TT, do_h, ldq, sq, accumulate,
                              dv + kv_offset(d, b, j0), ldkv, skv, nj);
        sgemm_strided_batched(false, false, d.T, d.D, d.T, d.scale, ds_buf.p, d.T, TT, k_j, ldkv, skv, 0.0f,
                              dq + q_offset(d, b, i, j0), ldq, sq, nj);
        sgemm_strided_batched(true, false, d.T, d.D, d.T, d.scale, ds_buf.p, d.T, TT, q_h, ldq, sq, accumulate,
                              dk + kv_offset(d, b, j0), ldkv, skv, nj);
      }
    }
  }
}

}  // namespace lattice::cuda
