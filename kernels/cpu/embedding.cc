// CPU embedding lookups and their gradients.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice::cpu {

int64_t first_bad_index(const int32_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return i;
  }
  return -1;
}

void check_indices(const char* op, const char* what, const int32_t* ids, int64_t n, int64_t vocab) {
  const int64_t bad = first_bad_index(ids, n, vocab);
  if (bad >= 0) {
    throw Error(fmt::format("{}: {} {} at position {} is outside [0, {})", op, what, ids[bad], bad, vocab));
  }
}

void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden) {
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * hidden, table + static_cast<int64_t>(ids[i]) * hidden, sizeof(float) * hidden);
  }
}

void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden) {
  // Each thread owns a column block of the table and walks all rows in order: repeated ids never
  // race, and the summation order (row order) is deterministic.
  constexpr int64_t kCols = 128;
  const int64_t blocks = (hidden + kCols - 1) / kCols;
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kCols, nc = std::min(hidden, c0 + kCols) - c0;
    for (int64_t i = 0; i < n; ++i) {
      const float* src = dout + i * hidden + c0;
      float* dst = dtable + static_cast<int64_t>(ids[i]) * hidden + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dst[c] += src[c];
    }
  }
}

void add_position_embedding(float* x, const float* table, int64_t batch, int64_t seq, int64_t hidden) {
#pragma omp parallel for collapse(2) if (batch * seq * hidden > (1 << 15)) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      float* xr = x + (b * seq + t) * hidden;
      const float* pr = table + t * hidden;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) xr[c] += pr[c];
    }
  }
}

void position_embedding_backward(const float* dx, float* dtable, int64_t batch, int64_t seq, int64_t hidden) {
  // Parallel over positions: each thread owns rows of dtable.
#pragma omp parallel for if (batch * seq * hidden > (1 << 15)) schedule(static)
  for (int64_t t = 0; t < seq; ++t) {
    float* dr = dtable + t * hidden;
    for (int64_t b = 0; b < batch; ++b) {
      const float* src = dx + (b * seq + t) * hidden;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) dr[c] += src[c];
    }
  }
}

void embedding_forward_shard(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows) {
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(ids[i]) - first_row;
    if (row >= 0 && row < rows) {
      std::memcpy(out + i * hidden, table + row * hidden, sizeof(float) * hidden);
    } else {
      std::memset(out + i * hidden, 0, sizeof(float) * hidden);
    }
  }
}

void embedding_backward_shard(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows) {
  // As embedding_backward: threads own column blocks, rows in order.
  constexpr int64_t kCols = 128;
  const int64_t blocks = (hidden + kCols - 1) / kCols;
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kCols, nc = std::min(hidden, c0 + kCols) - c0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]) - first_row;
      if (row < 0 || row >= rows) continue;
      const float* src = dout + i * hidden + c0;
      float* dst = dtable + row * hidden + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dst[c] += src[c];
    }
  }
}

void add_position_embedding_tokens(float* x, const float* table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token) {
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* xr = x + i * hidden;
    const float* pr = table + ((first_token + i) % seq) * hidden;
#pragma omp simd
    for (int64_t c = 0; c < hidden; ++c) xr[c] += pr[c];
  }
}

void position_embedding_backward_tokens(const float* dx, float* dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token) {
  const int64_t shift = first_token % seq;
#pragma omp parallel for if (n * hidden > (1 << 15)) schedule(static)
  for (int64_t t = 0; t < seq; ++t) {
    float* dr = dtable + t * hidden;
    // Local rows i with (first_token + i) mod seq == t.
    for (int64_t i = (t - shift + seq) % seq; i < n; i += seq) {
      const float* src = dx + i * hidden;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c) dr[c] += src[c];
    }
  }
}

}  // namespace lattice::cpu
