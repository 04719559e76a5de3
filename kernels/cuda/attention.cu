// CUDA causal attention, fp32. Tiles of kTile = 64 query rows by 64 key rows; 256 threads per block,
// thread t owns tile row t / 4 and the columns / head dims congruent to t % 4 (mod 4), so the 4
// threads of a row sit in one warp and combine row statistics with shuffles.
//
// The head dim is padded to DMAX (32, 64 or 128) with zeros in shared memory: padded dims add 0 to
// every dot product and are never stored. Shared rows have stride DMAX + 1 (no bank conflicts).
//
// Forward:      block (q tile, q head, batch); loops kv tiles 0..diagonal with online softmax.
// Backward:     Dvec[b, h, t] = sum_d dout * out (one warp per row), then
//   dK/dV:      block (kv tile, kv head, batch); loops every q head of the GQA group and every q tile
//               at or after the diagonal, accumulating dV += P^T dO, dK += dS^T Q in registers;
//   dQ:         block (q tile, q head, batch); loops kv tiles 0..diagonal, dQ += dS K.
// Every output element is written once by one thread after a fixed-order sum: deterministic.
#include "kernels/cuda/attention.h"

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/runtime.h"

namespace lattice::cuda {

namespace {

constexpr int kTile = 64;      // rows of a q tile and of a kv tile (equal: the diagonal tile index is shared)
constexpr int kThreads = 256;  // 4 threads per tile row
constexpr int kPLd = kTile + 1;
constexpr int kMaxHeadDim = 128;

static_assert(kThreads == 4 * kTile, "thread layout: 4 threads per tile row");

// Floats of shared memory each kernel uses (must match the carving in the kernels).
template <int DMAX>
constexpr size_t forward_smem_bytes() {
  return sizeof(float) * (3 * kTile * (DMAX + 1) + kTile * kPLd);  // Q, K, V, P
}
template <int DMAX>
constexpr size_t dkdv_smem_bytes() {
  return sizeof(float) * (4 * kTile * (DMAX + 1) + 2 * kTile * kPLd + 2 * kTile);  // K, V, Q, dO, Pt, dSt, lse, Dvec
}
template <int DMAX>
constexpr size_t dq_smem_bytes() {
  return sizeof(float) * (4 * kTile * (DMAX + 1) + kTile * kPLd);  // Q, dO, K, V, dS
}

// dst[r][d] (stride DMAX + 1) = src[(row0 + r) * ld + d] for rows < T and d < D, else 0.
template <int DMAX>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int64_t ld, int row0, int T, int D) {
  constexpr int LD = DMAX + 1;
  for (int idx = threadIdx.x; idx < kTile * DMAX; idx += kThreads) {
    const int r = idx / DMAX, d = idx % DMAX;
    const int t = row0 + r;
    dst[r * LD + d] = (t < T && d < D) ? src[static_cast<int64_t>(t) * ld + d] : 0.0f;
  }
}

// Reduce over the 4 threads of a tile row (lanes 4r..4r+3 of one warp).
__device__ __forceinline__ float row_max4(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return x;
}
__device__ __forceinline__ float row_sum4(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Forward. grid (nT, Hq, B).
template <int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                             float* __restrict__ out, float* __restrict__ lse, int T, int Hq, int Hkv, int D,
                             float scale) {
  constexpr int LD = DMAX + 1;
  constexpr int ND = DMAX / 4;   // head dims per thread
  constexpr int NJ = kTile / 4;  // key columns per thread
  extern __shared__ float smem[];
  float* Qs = smem;              // [kTile][LD]
  float* Ks = Qs + kTile * LD;   // [kTile][LD]
  float* Vs = Ks + kTile * LD;   // [kTile][LD]
  float* Ps = Vs + kTile * LD;   // [kTile][kPLd]

  const int nT = (T + kTile - 1) / kTile;
  const int qt = nT - 1 - static_cast<int>(blockIdx.x);  // heaviest (last) tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int g = h / (Hq / Hkv);
  const int q0 = qt * kTile;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int64_t ldq = static_cast<int64_t>(Hq) * D, ldkv = static_cast<int64_t>(Hkv) * D;
  const float* qb = q + static_cast<int64_t>(b) * T * ldq + static_cast<int64_t>(h) * D;
  const float* kb = k + static_cast<int64_t>(b) * T * ldkv + static_cast<int64_t>(g) * D;
  const float* vb = v + static_cast<int64_t>(b) * T * ldkv + static_cast<int64_t>(g) * D;

  load_tile<DMAX>(Qs, qb, ldq, q0, T, D);
  // Rows past T compute as row T - 1 (finite values, never stored); key 0 is always unmasked, so
  // the running max is finite after the first kv tile.
  const int qi = min(q0 + r, T - 1);

  float m = -INFINITY, l = 0.0f;
  float o[ND];
#pragma unroll
  for (int dd = 0; dd < ND; ++dd) o[dd] = 0.0f;

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous tile's readers of Ks / Vs / Ps are done
    load_tile<DMAX>(Ks, kb, ldkv, k0, T, D);
    load_tile<DMAX>(Vs, vb, ldkv, k0, T, D);
    __syncthreads();

    float s[NJ];
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) s[jj] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < DMAX; ++kk) {
      const float qv = Qs[r * LD + kk];
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) s[jj] += qv * Ks[(c + 4 * jj) * LD + kk];
    }

    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      const int kj = k0 + c + 4 * jj;
      s[jj] = (kj <= qi) ? s[jj] * scale : -INFINITY;  // causal mask (kj <= qi < T also masks kj >= T)
      tile_max = fmaxf(tile_max, s[jj]);
    }
    tile_max = row_max4(tile_max);
    const float m_new = fmaxf(m, tile_max);  // finite (see above)
    const float alpha = expf(m - m_new);     // 0 on the first tile (m = -inf)
    float psum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      const int kj = k0 + c + 4 * jj;
      const float p = (kj <= qi) ? expf(s[jj] - m_new) : 0.0f;
      psum += p;
      Ps[r * kPLd + c + 4 * jj] = p;
    }
    psum = row_sum4(psum);
    l = l * alpha + psum;
    m = m_new;
#pragma unroll
    for (int dd = 0; dd < ND; ++dd) o[dd] *= alpha;
    __syncthreads();  // Ps of this row written by its 4 threads

    for (int j = 0; j < kTile; ++j) {
      const float p = Ps[r * kPLd + j];
#pragma unroll
      for (int dd = 0; dd < ND; ++dd) o[dd] += p * Vs[j * LD + c + 4 * dd];
    }
  }

  const int t = q0 + r;
  if (t < T) {
    const float inv = 1.0f / l;
    float* ob = out + (static_cast<int64_t>(b) * T + t) * ldq + static_cast<int64_t>(h) * D;
#pragma unroll
    for (int dd = 0; dd < ND; ++dd) {
      const int d = c + 4 * dd;
      if (d < D) ob[d] = o[dd] * inv;
    }
    if (c == 0) lse[(static_cast<int64_t>(b) * Hq + h) * T + t] = m + logf(l);
  }
}

// ---------------------------------------------------------------------------------------------
// Dvec[(b * Hq + h) * T + t] = sum_d dout * out at [b, t, h, :]. One warp per row.
__global__ void attention_dvec_kernel(const float* __restrict__ dout, const float* __restrict__ out,
                                      float* __restrict__ dvec, int64_t rows, int T, int Hq, int D) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = warp; row < rows; row += warps) {
    const int64_t t = row % T, bh = row / T;
    const int64_t h = bh % Hq, b = bh / Hq;
    const int64_t off = ((b * T + t) * Hq + h) * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += dout[off + d] * out[off + d];
#pragma unroll
    for (int w = 16; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
    if (lane == 0) dvec[row] = acc;
  }
}

// ---------------------------------------------------------------------------------------------
// dK, dV. grid (nT, Hkv, B); block kt owns kv rows [kt * kTile, +kTile) of kv head g.
template <int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_dkdv_kernel(const float* __restrict__ dout, const float* __restrict__ q, const float* __restrict__ k,
                          const float* __restrict__ v, const float* __restrict__ lse,
                          const float* __restrict__ dvec, float* __restrict__ dk, float* __restrict__ dv, int T,
                          int Hq, int Hkv, int D, float scale) {
  constexpr int LD = DMAX + 1;
  constexpr int ND = DMAX / 4;   // head dims per thread
  constexpr int NI = kTile / 4;  // q rows per thread in the score phase
  extern __shared__ float smem[];
  float* Ks = smem;               // [kTile][LD]
  float* Vs = Ks + kTile * LD;    // [kTile][LD]
  float* Qs = Vs + kTile * LD;    // [kTile][LD]
  float* dOs = Qs + kTile * LD;   // [kTile][LD]
  float* Pt = dOs + kTile * LD;   // [kv row j][q row i], stride kPLd
  float* dSt = Pt + kTile * kPLd; // same
  float* lse_s = dSt + kTile * kPLd;  // [kTile]
  float* dvec_s = lse_s + kTile;      // [kTile]

  const int nT = (T + kTile - 1) / kTile;
  const int kt = blockIdx.x;  // tile 0 has the most work and launches first
  const int g = blockIdx.y, b = blockIdx.z;
  const int group = Hq / Hkv;
  const int k0 = kt * kTile;
  const int j = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int kj = k0 + j;
  const int64_t ldq = static_cast<int64_t>(Hq) * D, ldkv = static_cast<int64_t>(Hkv) * D;
  const int64_t kv_off = static_cast<int64_t>(b) * T * ldkv + static_cast<int64_t>(g) * D;

  load_tile<DMAX>(Ks, k + kv_off, ldkv, k0, T, D);
  load_tile<DMAX>(Vs, v + kv_off, ldkv, k0, T, D);

  float dk_acc[ND], dv_acc[ND];
#pragma unroll
  for (int dd = 0; dd < ND; ++dd) {
    dk_acc[dd] = 0.0f;
    dv_acc[dd] = 0.0f;
  }

  for (int h = g * group; h < (g + 1) * group; ++h) {
    const int64_t q_off = static_cast<int64_t>(b) * T * ldq + static_cast<int64_t>(h) * D;
    const float* lse_h = lse + (static_cast<int64_t>(b) * Hq + h) * T;
    const float* dvec_h = dvec + (static_cast<int64_t>(b) * Hq + h) * T;
    for (int qt = kt; qt < nT; ++qt) {  // q tiles at or after the diagonal
      const int q0 = qt * kTile;
      __syncthreads();  // previous iteration's readers of Qs / dOs / Pt / dSt are done (and Ks / Vs loaded)
      load_tile<DMAX>(Qs, q + q_off, ldq, q0, T, D);
      load_tile<DMAX>(dOs, dout + q_off, ldq, q0, T, D);
      if (threadIdx.x < kTile) {
        const int t = q0 + threadIdx.x;
        lse_s[threadIdx.x] = t < T ? lse_h[t] : 0.0f;
        dvec_s[threadIdx.x] = t < T ? dvec_h[t] : 0.0f;
      }
      __syncthreads();

      // S[i][j] = Q_i . K_j and dP[i][j] = dO_i . V_j for this thread's kv row j, q rows i = c + 4 ii.
      float s[NI], dp[NI];
#pragma unroll
      for (int ii = 0; ii < NI; ++ii) {
        s[ii] = 0.0f;
        dp[ii] = 0.0f;
      }
#pragma unroll 2
      for (int kk = 0; kk < DMAX; ++kk) {
        const float kv = Ks[j * LD + kk];
        const float vv = Vs[j * LD + kk];
#pragma unroll
        for (int ii = 0; ii < NI; ++ii) {
          const int i = c + 4 * ii;
          s[ii] += Qs[i * LD + kk] * kv;
          dp[ii] += dOs[i * LD + kk] * vv;
        }
      }
#pragma unroll
      for (int ii = 0; ii < NI; ++ii) {
        const int i = c + 4 * ii;
        const int qi = q0 + i;
        const bool valid = qi < T && kj < T && kj <= qi;
        const float p = valid ? expf(s[ii] * scale - lse_s[i]) : 0.0f;
        const float ds = valid ? p * (dp[ii] - dvec_s[i]) : 0.0f;
        Pt[j * kPLd + i] = p;
        dSt[j * kPLd + i] = ds;
      }
      __syncthreads();  // Pt / dSt of row j written by its 4 threads

      // dV_j += sum_i P[i][j] dO_i ; dK_j += sum_i dS[i][j] Q_i (scale applied at the end).
      for (int i = 0; i < kTile; ++i) {
        const float p = Pt[j * kPLd + i];
        const float ds = dSt[j * kPLd + i];
#pragma unroll
        for (int dd = 0; dd < ND; ++dd) {
          const int d = c + 4 * dd;
          dv_acc[dd] += p * dOs[i * LD + d];
          dk_acc[dd] += ds * Qs[i * LD + d];
        }
      }
    }
  }

  if (kj < T) {
    float* dkb = dk + kv_off + static_cast<int64_t>(kj) * ldkv;
    float* dvb = dv + kv_off + static_cast<int64_t>(kj) * ldkv;
#pragma unroll
    for (int dd = 0; dd < ND; ++dd) {
      const int d = c + 4 * dd;
      if (d < D) {
        dkb[d] = dk_acc[dd] * scale;
        dvb[d] = dv_acc[dd];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// dQ. grid (nT, Hq, B); block owns q rows [qt * kTile, +kTile) of q head h.
template <int DMAX>
__global__ void __launch_bounds__(kThreads, 1)
    attention_dq_kernel(const float* __restrict__ dout, const float* __restrict__ q, const float* __restrict__ k,
                        const float* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ dvec,
                        float* __restrict__ dq, int T, int Hq, int Hkv, int D, float scale) {
  constexpr int LD = DMAX + 1;
  constexpr int ND = DMAX / 4;   // head dims per thread
  constexpr int NJ = kTile / 4;  // key columns per thread
  extern __shared__ float smem[];
  float* Qs = smem;              // [kTile][LD]
  float* dOs = Qs + kTile * LD;  // [kTile][LD]
  float* Ks = dOs + kTile * LD;  // [kTile][LD]
  float* Vs = Ks + kTile * LD;   // [kTile][LD]
  float* dSs = Vs + kTile * LD;  // [q row i][kv row j], stride kPLd

  const int nT = (T + kTile - 1) / kTile;
  const int qt = nT - 1 - static_cast<int>(blockIdx.x);  // heaviest (last) tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int g = h / (Hq / Hkv);
  const int q0 = qt * kTile;
  const int i = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int qi = q0 + i;
  const int64_t ldq = static_cast<int64_t>(Hq) * D, ldkv = static_cast<int64_t>(Hkv) * D;
  const int64_t q_off = static_cast<int64_t>(b) * T * ldq + static_cast<int64_t>(h) * D;
  const int64_t kv_off = static_cast<int64_t>(b) * T * ldkv + static_cast<int64_t>(g) * D;

  load_tile<DMAX>(Qs, q + q_off, ldq, q0, T, D);
  load_tile<DMAX>(dOs, dout + q_off, ldq, q0, T, D);
  const int64_t row = (static_cast<int64_t>(b) * Hq + h) * T + qi;
  const float lse_i = qi < T ? lse[row] : 0.0f;
  const float dvec_i = qi < T ? dvec[row] : 0.0f;

  float dq_acc[ND];
#pragma unroll
  for (int dd = 0; dd < ND; ++dd) dq_acc[dd] = 0.0f;

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // previous tile's readers of Ks / Vs / dSs are done (and Qs / dOs loaded)
    load_tile<DMAX>(Ks, k + kv_off, ldkv, k0, T, D);
    load_tile<DMAX>(Vs, v + kv_off, ldkv, k0, T, D);
    __syncthreads();

    // S[i][j] = Q_i . K_j, dP[i][j] = dO_i . V_j for this thread's q row i, kv rows j = c + 4 jj.
    float s[NJ], dp[NJ];
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      s[jj] = 0.0f;
      dp[jj] = 0.0f;
    }
#pragma unroll 2
    for (int kk = 0; kk < DMAX; ++kk) {
      const float qv = Qs[i * LD + kk];
      const float ov = dOs[i * LD + kk];
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) {
        const int jr = c + 4 * jj;
        s[jj] += qv * Ks[jr * LD + kk];
        dp[jj] += ov * Vs[jr * LD + kk];
      }
    }
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      const int jr = c + 4 * jj;
      const int kj = k0 + jr;
      const bool valid = qi < T && kj <= qi;  // kj <= qi < T also bounds kj
      const float p = valid ? expf(s[jj] * scale - lse_i) : 0.0f;
      dSs[i * kPLd + jr] = valid ? p * (dp[jj] - dvec_i) : 0.0f;
    }
    __syncthreads();  // dSs of row i written by its 4 threads

    // dQ_i += sum_j dS[i][j] K_j (scale applied at the end).
    for (int jr = 0; jr < kTile; ++jr) {
      const float ds = dSs[i * kPLd + jr];
#pragma unroll
      for (int dd = 0; dd < ND; ++dd) dq_acc[dd] += ds * Ks[jr * LD + c + 4 * dd];
    }
  }

  if (qi < T) {
    float* dqb = dq + q_off + static_cast<int64_t>(qi) * ldq;
#pragma unroll
    for (int dd = 0; dd < ND; ++dd) {
      const int d = c + 4 * dd;
      if (d < D) dqb[d] = dq_acc[dd] * scale;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

void check_shape(const char* op, const AttentionShape& s) {
  if (s.head_dim < 1 || s.head_dim > kMaxHeadDim) {
    fail(op, "the CUDA attention kernel supports head_dim in [1, 128]", __FILE__, __LINE__);
  }
  if (s.kv_heads < 1 || s.q_heads % s.kv_heads != 0) {
    fail(op, "q_heads must be a positive multiple of kv_heads", __FILE__, __LINE__);
  }
  if (s.seq > (int64_t{1} << 30) || s.q_heads > 65535 || s.batch > 65535) {
    fail(op, "attention shape exceeds the CUDA grid limits (seq < 2^30, heads and batch <= 65535)", __FILE__,
         __LINE__);
  }
}

bool empty(const AttentionShape& s) { return s.batch == 0 || s.seq == 0; }

template <int DMAX>
void launch_forward(const float* q, const float* k, const float* v, float* out, float* lse, const AttentionShape& s) {
  const int T = static_cast<int>(s.seq), Hq = static_cast<int>(s.q_heads), Hkv = static_cast<int>(s.kv_heads);
  const int D = static_cast<int>(s.head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int nT = (T + kTile - 1) / kTile;
  constexpr size_t smem = forward_smem_bytes<DMAX>();
  LATTICE_CUDA_CHECK(cudaFuncSetAttribute(attention_forward_kernel<DMAX>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(nT), static_cast<unsigned>(Hq), static_cast<unsigned>(s.batch));
  attention_forward_kernel<DMAX><<<grid, kThreads, smem, compute_stream()>>>(q, k, v, out, lse, T, Hq, Hkv, D, scale);
  LATTICE_CUDA_LAUNCHED();
}

template <int DMAX>
void launch_backward(const float* dout, const float* q, const float* k, const float* v, const float* lse,
                     const float* dvec, float* dq, float* dk, float* dv, const AttentionShape& s) {
  const int T = static_cast<int>(s.seq), Hq = static_cast<int>(s.q_heads), Hkv = static_cast<int>(s.kv_heads);
  const int D = static_cast<int>(s.head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int nT = (T + kTile - 1) / kTile;

  constexpr size_t smem_kv = dkdv_smem_bytes<DMAX>();
  LATTICE_CUDA_CHECK(cudaFuncSetAttribute(attention_dkdv_kernel<DMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_kv)));
  const dim3 grid_kv(static_cast<unsigned>(nT), static_cast<unsigned>(Hkv), static_cast<unsigned>(s.batch));
  attention_dkdv_kernel<DMAX><<<grid_kv, kThreads, smem_kv, compute_stream()>>>(dout, q, k, v, lse, dvec, dk, dv, T,
                                                                                  Hq, Hkv, D, scale);
  LATTICE_CUDA_LAUNCHED();

  constexpr size_t smem_q = dq_smem_bytes<DMAX>();
  LATTICE_CUDA_CHECK(cudaFuncSetAttribute(attention_dq_kernel<DMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_q)));
  const dim3 grid_q(static_cast<unsigned>(nT), static_cast<unsigned>(Hq), static_cast<unsigned>(s.batch));
  attention_dq_kernel<DMAX><<<grid_q, kThreads, smem_q, compute_stream()>>>(dout, q, k, v, lse, dvec, dq, T, Hq, Hkv,
                                                                              D, scale);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace

void attention_forward_flash(const float* q, const float* k, const float* v, float* out, float* lse,
                             const AttentionShape& s) {
  check_shape("attention_forward", s);
  if (empty(s) || s.q_heads == 0) return;
  if (s.head_dim <= 32) {
    launch_forward<32>(q, k, v, out, lse, s);
  } else if (s.head_dim <= 64) {
    launch_forward<64>(q, k, v, out, lse, s);
  } else {
    launch_forward<128>(q, k, v, out, lse, s);
  }
}

void attention_dvec(const float* dout, const float* out, float* dvec, const AttentionShape& s) {
  const int64_t rows = s.batch * s.q_heads * s.seq;
  if (rows == 0) return;
  constexpr int kDvecThreads = 256;
  attention_dvec_kernel<<<grid_for(rows * 32, kDvecThreads), kDvecThreads, 0, compute_stream()>>>(
      dout, out, dvec, rows, static_cast<int>(s.seq), static_cast<int>(s.q_heads), static_cast<int>(s.head_dim));
  LATTICE_CUDA_LAUNCHED();
}

void attention_backward_flash(const float* dout, const float* q, const float* k, const float* v, const float* out,
                              const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s) {
  check_shape("attention_backward", s);
  if (empty(s)) return;
  if (s.q_heads == 0) {  // no q head reads k / v: their gradients are 0
    const size_t bytes = sizeof(float) * static_cast<size_t>(s.batch * s.seq * s.kv_heads * s.head_dim);
    LATTICE_CUDA_CHECK(cudaMemsetAsync(dk, 0, bytes, compute_stream()));
    LATTICE_CUDA_CHECK(cudaMemsetAsync(dv, 0, bytes, compute_stream()));
    return;
  }
  const int64_t rows = s.batch * s.q_heads * s.seq;
  float* dvec = static_cast<float*>(allocate(sizeof(float) * static_cast<size_t>(rows)));
  try {
    attention_dvec(dout, out, dvec, s);
    if (s.head_dim <= 32) {
      launch_backward<32>(dout, q, k, v, lse, dvec, dq, dk, dv, s);
    } else if (s.head_dim <= 64) {
      launch_backward<64>(dout, q, k, v, lse, dvec, dq, dk, dv, s);
    } else {
      launch_backward<128>(dout, q, k, v, lse, dvec, dq, dk, dv, s);
    }
  } catch (...) {
    release(dvec);
    throw;
  }
  release(dvec);
}

}  // namespace lattice::cuda
