// CPU LayerNorm and RMSNorm. Rows run in parallel; parameter gradients are summed into per-thread
// partial buffers and reduced afterwards in a fixed order (no races, deterministic for a given
// thread count).
#include "kernels/cpu/norm.h"

#include <omp.h>

#include <cmath>

#include "kernels/cpu/scratch.h"

namespace lattice::cpu {

namespace {

bool parallel_worth(int64_t rows, int64_t hidden) { return rows > 1 && rows * hidden > (1 << 14); }

// grad[c] += sum over threads of partial[t * stride + c], parallel over c.
void reduce_partials(const float* partial, int threads, int64_t stride, int64_t offset, float* grad,
                     int64_t hidden) {
#pragma omp parallel for if (hidden * threads > (1 << 14)) schedule(static)
  for (int64_t c = 0; c < hidden; ++c) {
    float s = 0.0f;
    for (int t = 0; t < threads; ++t) s += partial[t * stride + offset + c];
    grad[c] += s;
  }
}

}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, float eps, float* y, float* mean,
                       float* rstd, int64_t rows, int64_t hidden) {
  const float inv_h = 1.0f / static_cast<float>(hidden);
#pragma omp parallel for if (parallel_worth(rows, hidden)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < hidden; ++c) s += xr[c];
    const float m = s * inv_h;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t c = 0; c < hidden; ++c) v += (xr[c] - m) * (xr[c] - m);
    const float rs = 1.0f / std::sqrt(v * inv_h + eps);
    mean[r] = m;
    rstd[r] = rs;
    if (beta != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) yr[c] = (xr[c] - m) * rs * gamma[c];
    }
  }
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t hidden) {
  // xhat = (x - mean) * rstd, g = dy * gamma:
  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); dgamma += sum_rows dy * xhat; dbeta += sum_rows dy.
  const float inv_h = 1.0f / static_cast<float>(hidden);
  const bool par = parallel_worth(rows, hidden);
  const int threads = par ? omp_get_max_threads() : 1;
  const int64_t stride = 2 * hidden;
  float* const partial = scratch(ScratchSlot::kNormPartials, static_cast<size_t>(threads) * stride, /*zero=*/true);
#pragma omp parallel if (par) num_threads(threads)
  {
    float* pg = partial + omp_get_thread_num() * stride;
    float* pb = pg + hidden;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * hidden;
      const float* dyr = dy + r * hidden;
      float* dxr = dx + r * hidden;
      const float m = mean[r], rs = rstd[r];
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t c = 0; c < hidden; ++c) {
        const float g = dyr[c] * gamma[c];
        sum_g += g;
        sum_gx += g * (xr[c] - m) * rs;
      }
      const float mg = sum_g * inv_h, mgx = sum_gx * inv_h;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) {
        const float xhat = (xr[c] - m) * rs;
        dxr[c] = rs * (dyr[c] * gamma[c] - mg - xhat * mgx);
        pg[c] += dyr[c] * xhat;
        pb[c] += dyr[c];
      }
    }
  }
  reduce_partials(partial, threads, stride, 0, dgamma, hidden);
  if (dbeta != nullptr) reduce_partials(partial, threads, stride, hidden, dbeta, hidden);
}

void rmsnorm_forward(const float* x, const float* gamma, float eps, float* y, float* rstd, int64_t rows,
                     int64_t hidden) {
  const float inv_h = 1.0f / static_cast<float>(hidden);
#pragma omp parallel for if (parallel_worth(rows, hidden)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < hidden; ++c) ss += xr[c] * xr[c];
    const float rs = 1.0f / std::sqrt(ss * inv_h + eps);
    rstd[r] = rs;
#pragma omp simd
    for (int64_t c = 0; c < hidden; ++c) yr[c] = xr[c] * rs * gamma[c];
  }
}

void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                      float* dgamma, int64_t rows, int64_t hidden) {
  // xhat = x * rstd, g = dy * gamma: dx = rstd * (g - xhat * mean(g * xhat)); dgamma += sum_rows dy * xhat.
  const float inv_h = 1.0f / static_cast<float>(hidden);
  const bool par = parallel_worth(rows, hidden);
  const int threads = par ? omp_get_max_threads() : 1;
  float* const partial = scratch(ScratchSlot::kNormPartials, static_cast<size_t>(threads) * hidden, /*zero=*/true);
#pragma omp parallel if (par) num_threads(threads)
  {
    float* pg = partial + omp_get_thread_num() * hidden;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * hidden;
      const float* dyr = dy + r * hidden;
      float* dxr = dx + r * hidden;
      const float rs = rstd[r];
      float sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_gx)
      for (int64_t c = 0; c < hidden; ++c) sum_gx += dyr[c] * gamma[c] * xr[c] * rs;
      const float mgx = sum_gx * inv_h;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) {
        const float xhat = xr[c] * rs;
        dxr[c] = rs * (dyr[c] * gamma[c] - xhat * mgx);
        pg[c] += dyr[c] * xhat;
      }
    }
  }
  reduce_partials(partial, threads, hidden, 0, dgamma, hidden);
}

}  // namespace lattice::cpu
