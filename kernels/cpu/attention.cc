// CPU causal attention. One task per (batch, head) in forward and per (batch, kv head) in
// backward (so the q heads of a GQA group accumulate dK/dV without races); each task reads its
// head straight out of [B, T, H, D] through BLAS leading dimensions (lda = H * D), no copies.
// Scratch: two [T, T] float buffers per thread, allocated once per call.
#include "kernels/cpu/attention.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec_math.h"

namespace lattice::cpu {

namespace {

// Parallelize over tasks only when there are enough of them; otherwise leave the threads to BLAS
// (OpenBLAS runs single-threaded inside an active OpenMP region).
int task_threads(int64_t tasks) {
  const int threads = omp_get_max_threads();
  return tasks >= threads ? threads : 1;
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                       const AttentionShape& s) {
  const int64_t T = s.seq, D = s.head_dim, Hq = s.q_heads, Hkv = s.kv_heads;
  const int64_t group = Hq / Hkv;
  const int64_t ldq = Hq * D, ldkv = Hkv * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t tasks = s.batch * Hq;
  const int threads = task_threads(tasks);
  float* const workspace = scratch(ScratchSlot::kAttentionForward, static_cast<size_t>(threads) * T * T);

#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(dynamic, 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / Hq, h = task % Hq, g = h / group;
    float* S = workspace + static_cast<int64_t>(omp_get_thread_num()) * T * T;
    const float* qh = q + b * T * ldq + h * D;
    const float* kh = k + b * T * ldkv + g * D;
    const float* vh = v + b * T * ldkv + g * D;
    float* oh = out + b * T * ldq + h * D;
    float* lse_h = lse + (b * Hq + h) * T;

    sgemm(false, true, T, T, D, 1.0f, qh, ldq, kh, ldkv, 0.0f, S, T);  // S = Q K^T
    for (int64_t i = 0; i < T; ++i) {
      float* row = S + i * T;
      const int64_t n = i + 1;  // causal: keys 0..i
      float m = -INFINITY;
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;
      m *= scale;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        const float p = fast_exp(row[j] * scale - m);
        row[j] = p;
        sum += p;
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] *= inv;
      for (int64_t j = n; j < T; ++j) row[j] = 0.0f;
      lse_h[i] = m + std::log(sum);
    }
    sgemm(false, false, T, D, T, 1.0f, S, T, vh, ldkv, 0.0f, oh, ldq);  // O = P V
  }
}

void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s) {
  const int64_t T = s.seq, D = s.head_dim, Hq = s.q_heads, Hkv = s.kv_heads;
  const int64_t group = Hq / Hkv;
  const int64_t ldq = Hq * D, ldkv = Hkv * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t tasks = s.batch * Hkv;
  const int threads = task_threads(tasks);
  float* const workspace = scratch(ScratchSlot::kAttentionBackward, static_cast<size_t>(threads) * 2 * T * T);

#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(dynamic, 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / Hkv, g = task % Hkv;
    float* P = workspace + static_cast<int64_t>(omp_get_thread_num()) * 2 * T * T;
    float* dP = P + T * T;
    const float* kg = k + b * T * ldkv + g * D;
    const float* vg = v + b * T * ldkv + g * D;
    float* dkg = dk + b * T * ldkv + g * D;
    float* dvg = dv + b * T * ldkv + g * D;
    for (int64_t t = 0; t < T; ++t) {
      std::memset(dkg + t * ldkv, 0, sizeof(float) * D);
      std::memset(dvg + t * ldkv, 0, sizeof(float) * D);
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + b * T * ldq + h * D;
      const float* oh = out + b * T * ldq + h * D;
      const float* doh = dout + b * T * ldq + h * D;
      float* dqh = dq + b * T * ldq + h * D;
      const float* lse_h = lse + (b * Hq + h) * T;

      sgemm(false, true, T, T, D, 1.0f, qh, ldq, kg, ldkv, 0.0f, P, T);  // S = Q K^T
      for (int64_t i = 0; i < T; ++i) {  // P = exp(S * scale - lse), causal
        float* row = P + i * T;
        const float l = lse_h[i];
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) row[j] = fast_exp(row[j] * scale - l);
        for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
      }
      sgemm(true, false, T, D, T, 1.0f, P, T, doh, ldq, 1.0f, dvg, ldkv);  // dV += P^T dO
      sgemm(false, true, T, T, D, 1.0f, doh, ldq, vg, ldkv, 0.0f, dP, T);  // dP = dO V^T
      for (int64_t i = 0; i < T; ++i) {  // dS = P * (dP - rowsum(dO * O))
        const float* o_row = oh + i * ldq;
        const float* do_row = doh + i * ldq;
        float di = 0.0f;
#pragma omp simd reduction(+ : di)
        for (int64_t d = 0; d < D; ++d) di += o_row[d] * do_row[d];
        const float* p_row = P + i * T;
        float* ds_row = dP + i * T;
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) ds_row[j] = p_row[j] * (ds_row[j] - di);
        for (int64_t j = i + 1; j < T; ++j) ds_row[j] = 0.0f;
      }
      sgemm(false, false, T, D, T, scale, dP, T, kg, ldkv, 0.0f, dqh, ldq);  // dQ = scale dS K
      sgemm(true, false, T, D, T, scale, dP, T, qh, ldq, 1.0f, dkg, ldkv);   // dK += scale dS^T Q
    }
  }
}

}  // namespace lattice::cpu
