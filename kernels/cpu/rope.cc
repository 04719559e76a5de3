// CPU RoPE. cos/sin[t, i] for i < D/2 are computed in double (angle t * theta^(-2i/D) can reach
// ~1e5 rad for long contexts, where float angles lose digits), stored as float, and cached for the
// last (T, D, theta) seen: every layer's forward and backward reuse one table.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

namespace lattice::cpu {

namespace {

struct RopeTable {
  int64_t seq = 0, dim = 0;
  float theta = 0.0f;
  std::vector<float> cos_t, sin_t;  // [seq, dim / 2]
};

// The table for (seq, dim, theta): immutable once built, shared by concurrent callers.
std::shared_ptr<const RopeTable> rope_table(int64_t seq, int64_t dim, float theta) {
  static std::mutex mu;
  static std::shared_ptr<const RopeTable> cached;
  std::lock_guard<std::mutex> lock(mu);
  if (cached && cached->seq == seq && cached->dim == dim && cached->theta == theta) return cached;
  auto table = std::make_shared<RopeTable>();
  table->seq = seq;
  table->dim = dim;
  table->theta = theta;
  const int64_t half = dim / 2;
  table->cos_t.resize(static_cast<size_t>(seq * half));
  table->sin_t.resize(static_cast<size_t>(seq * half));
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / dim);
    for (int64_t t = 0; t < seq; ++t) {
      const double a = static_cast<double>(t) * inv_freq;
      table->cos_t[t * half + i] = static_cast<float>(std::cos(a));
      table->sin_t[t * half + i] = static_cast<float>(std::sin(a));
    }
  }
  cached = table;
  return cached;
}

}  // namespace

void rope(float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse) {
  const int64_t half = dim / 2;
  const std::shared_ptr<const RopeTable> table = rope_table(seq, dim, theta);
  // Forward:  y1 = x1 c - x2 s, y2 = x2 c + x1 s.  Inverse: y1 = x1 c + x2 s, y2 = x2 c - x1 s.
  const float sign = inverse ? -1.0f : 1.0f;
  const float* ct = table->cos_t.data();
  const float* st = table->sin_t.data();
#pragma omp parallel for collapse(2) if (batch * seq * heads * dim > (1 << 14)) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      const float* c = ct + t * half;
      const float* s = st + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* p1 = x + ((b * seq + t) * heads + h) * dim;
        float* p2 = p1 + half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = p1[i], x2 = p2[i], si = sign * s[i];
          p1[i] = x1 * c[i] - x2 * si;
          p2[i] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}

}  // namespace lattice::cpu
