// CUDA embedding lookups and their gradients. Contracts as kernels/cpu/embedding.cc, which is the
// oracle: every accumulation below adds in the same order as the CPU loop, so results are
// bit-identical (plain float adds, no atomics on floats, no reassociation). Tables, activations and
// their gradients are f32 or bf16 each (kernels/cuda/typed_access.cuh), except the token table's
// gradient, which is f32 (kernels/typed_kernels.h says why).
#include "kernels/cuda/embedding.h"

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {
namespace {

constexpr int kRowThreads = 256;  // threads over the columns of one row (row kernels)

// Blocks for a grid-stride loop over `rows` rows, one row per block per step.
unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(rows, 1), 65535 * 32));
}

// ---- validation ----

// *first = min position i with ids[i] outside [0, vocab). Integer atomicMin: order-independent.
__global__ void first_bad_kernel(const int32_t* __restrict__ ids, int64_t n, int64_t vocab,
                                 unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = ids[i];
    if (id < 0 || id >= vocab) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

struct BadIndex {
  unsigned long long pos;  // ULLONG_MAX: none
  int32_t id;
  int32_t pad;
};

// One thread: copy the offending id next to its position so a single copy brings both back.
__global__ void fetch_bad_id_kernel(const int32_t* __restrict__ ids, int64_t n, BadIndex* result) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    const unsigned long long pos = result->pos;
    result->id = pos < static_cast<unsigned long long>(n) ? ids[pos] : 0;
  }
}

// ---- token embeddings, forward ----

// out[i, :] = table[ids[i] - first_row, :] if that row is in [0, rows), else 0 (ids are validated
// beforehand). A bf16 row copied into bf16 is the same bits; f32 into bf16 rounds as staging does.
__global__ void embedding_forward_kernel(const int32_t* __restrict__ ids, DataIn table, DataOut out, int64_t n,
                                         int64_t hidden, int64_t first_row, int64_t rows) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t row = static_cast<int64_t>(ids[i]) - first_row;
    const int64_t dst = i * hidden;
    if (row >= 0 && row < rows) {
      const int64_t src = row * hidden;
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) store(out, dst + c, load(table, src + c));
    } else {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) store(out, dst + c, 0.0f);
    }
  }
}

// ---- token embeddings, backward ----
//
// Deterministic scatter-add without atomics. Table rows are split into kBuckets buckets by
// row mod kBuckets (needs no vocab size); block (x, y) owns columns [x * kBwdThreads, ...) of every
// row in bucket y, so no two threads ever write the same element. Each block walks all tokens in
// order n = 0..N-1 in chunks of kBwdThreads: the tokens of its bucket are compacted, still in
// order, into a shared list (ballot + warp prefix), and every thread then applies the list to its
// column in list order. So each dtable element receives its contributions in token order, as in
// the CPU loop. A thread keeps the row it last touched in a register (acc) and writes it back when
// the row changes: acc starts from dtable[row] and adds the same values in the same order, so the
// result is the same float as repeated dtable[row] += v, and runs of one id cost no memory round trips.
constexpr int kBwdThreads = 128;              // columns per block = ids examined per chunk
constexpr int kBwdWarps = kBwdThreads / 32;
constexpr int kBuckets = 128;                 // power of two: bucket = row & (kBuckets - 1)
constexpr int kListCap = 1024;                // shared list entries (12 KiB)
constexpr int kBatch = 8;                     // dout loads issued together before the ordered adds

__global__ void __launch_bounds__(kBwdThreads) embedding_backward_kernel(
    const int32_t* __restrict__ ids, DataIn dout, float* __restrict__ dtable, int64_t n, int64_t hidden,
    int64_t first_row, int64_t rows) {
  __shared__ int64_t s_token[kListCap];
  __shared__ int32_t s_row[kListCap];
  __shared__ int32_t s_warp_count[kBwdWarps];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int bucket = blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBwdThreads + threadIdx.x;
  const bool active = c < hidden;  // idle columns still take part in ballots and barriers

  int64_t cur = -1;  // row held in acc (-1: none)
  float acc = 0.0f;
  int len = 0;  // list length; every thread computes the same value

  for (int64_t base = 0; base < n; base += kBwdThreads) {
    // Compact this chunk's tokens of our bucket, in token order, onto the end of the list.
    const int64_t i = base + threadIdx.x;
    bool hit = false;
    int32_t row32 = 0;
    if (i < n) {
      const int64_t row = static_cast<int64_t>(ids[i]) - first_row;
      if (row >= 0 && row < rows) {
        row32 = static_cast<int32_t>(row);  // row <= id < 2^31
        hit = (row32 & (kBuckets - 1)) == bucket;
      }
    }
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) s_warp_count[warp] = __popc(mask);
    __syncthreads();
    int offset = len, total = 0;
#pragma unroll
    for (int w = 0; w < kBwdWarps; ++w) {
      const int cnt = s_warp_count[w];
      if (w < warp) offset += cnt;
      total += cnt;
    }
    if (hit) {
      const int pos = offset + __popc(mask & ((1u << lane) - 1u));
      s_token[pos] = i;
      s_row[pos] = row32;
    }
    len += total;
    __syncthreads();  // list entries visible; s_warp_count free for the next chunk

    // Apply the list when it could overflow on the next chunk, or at the end (uniform condition).
    if (len > kListCap - kBwdThreads || base + kBwdThreads >= n) {
      if (active) {
        for (int k0 = 0; k0 < len; k0 += kBatch) {
          float v[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (k0 + j < len) v[j] = load(dout, s_token[k0 + j] * hidden + c);
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (k0 + j < len) {
              const int64_t row = s_row[k0 + j];
              if (row != cur) {
                if (cur >= 0) dtable[cur * hidden + c] = acc;
                acc = dtable[row * hidden + c];
                cur = row;
              }
              acc += v[j];
            }
          }
        }
      }
      len = 0;
      __syncthreads();  // everyone is done reading the list before it is refilled
    }
  }
  if (active && cur >= 0) dtable[cur * hidden + c] = acc;
}

void launch_embedding_backward(const int32_t* ids, DataIn dout, float* dtable, int64_t n, int64_t hidden,
                               int64_t first_row, int64_t rows) {
  if (n <= 0 || hidden <= 0 || rows <= 0) return;
  // Shards smaller than kBuckets rows: buckets past `rows` are empty, so launch none for them.
  const int64_t buckets = std::min<int64_t>(kBuckets, rows);
  const dim3 grid(static_cast<unsigned>((hidden + kBwdThreads - 1) / kBwdThreads), static_cast<unsigned>(buckets));
  embedding_backward_kernel<<<grid, kBwdThreads, 0, compute_stream()>>>(ids, dout, dtable, n, hidden, first_row,
                                                                          rows);
  LATTICE_CUDA_LAUNCHED();
}

// ---- position embeddings ----

// x[r, :] += table[(first_token + r) mod seq, :] for rows r < n. The [B, T, H] form is the
// flattened one with first_token = 0 (row b * seq + t has position t).
__global__ void add_position_kernel(DataOut x, DataIn table, int64_t n, int64_t hidden, int64_t seq,
                                    int64_t first_token) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t xr = i * hidden;
    const int64_t pr = ((first_token + i) % seq) * hidden;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      store(x, xr + c, load(x, xr + c) + load(table, pr + c));
    }
  }
}

// dtable[t, c] += dx[i, c] over rows i = (t - shift + seq) mod seq, + seq, ... < n (shift =
// first_token mod seq), in increasing i: the CPU's order. A thread owns one (t, c) and
// accumulates in a register starting from dtable[t, c], which gives the same float as the CPU's
// repeated += (and one rounding of a bf16 dtable, as staging). For the [B, T, H] form (first_token
// = 0, n = B * T) the rows are b * T + t, b = 0..B-1, the CPU's b order.
__global__ void position_backward_kernel(DataIn dx, DataOut dtable, int64_t n, int64_t hidden, int64_t seq,
                                         int64_t first_token) {
  const int64_t shift = first_token % seq;
  for (int64_t t = blockIdx.x; t < seq; t += gridDim.x) {
    const int64_t first = (t - shift + seq) % seq;
    if (first >= n) continue;  // no rows at this position: leave the row untouched
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      float acc = load(dtable, t * hidden + c);
      for (int64_t i = first; i < n; i += seq) acc += load(dx, i * hidden + c);
      store(dtable, t * hidden + c, acc);
    }
  }
}

}  // namespace

int64_t first_bad_index(const int32_t* ids, int64_t n, int64_t vocab, int32_t* bad_id) {
  if (n <= 0) return -1;
  auto* result = static_cast<BadIndex*>(allocate(sizeof(BadIndex)));
  // Released in stream order on every path (copy_to_host may throw).
  struct Release {
    void* p;
    ~Release() { release(p); }
  } guard{result};
  LATTICE_CUDA_CHECK(cudaMemsetAsync(result, 0xff, sizeof(BadIndex), compute_stream()));  // pos = ULLONG_MAX
  constexpr int kThreads = 256;
  first_bad_kernel<<<std::min<unsigned>(grid_for(n, kThreads), 4096), kThreads, 0, compute_stream()>>>(
      ids, n, vocab, &result->pos);
  LATTICE_CUDA_LAUNCHED();
  fetch_bad_id_kernel<<<1, 32, 0, compute_stream()>>>(ids, n, result);
  LATTICE_CUDA_LAUNCHED();
  BadIndex host{};
  copy_to_host(result, &host, sizeof(BadIndex));  // synchronizes
  if (host.pos >= static_cast<unsigned long long>(n)) return -1;
  if (bad_id != nullptr) *bad_id = host.id;
  return static_cast<int64_t>(host.pos);
}

void embedding_forward_shard(const int32_t* ids, DataIn table, DataOut out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows) {
  if (n <= 0 || hidden <= 0) return;
  embedding_forward_kernel<<<row_blocks(n), kRowThreads, 0, compute_stream()>>>(ids, table, out, n, hidden,
                                                                                 first_row, rows);
  LATTICE_CUDA_LAUNCHED();
}

void embedding_backward_shard(const int32_t* ids, DataIn dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows) {
  launch_embedding_backward(ids, dout, dtable, n, hidden, first_row, rows);
}

void add_position_embedding_tokens(DataOut x, DataIn table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token) {
  if (n <= 0 || hidden <= 0 || seq <= 0) return;
  add_position_kernel<<<row_blocks(n), kRowThreads, 0, compute_stream()>>>(x, table, n, hidden, seq, first_token);
  LATTICE_CUDA_LAUNCHED();
}

void position_embedding_backward_tokens(DataIn dx, DataOut dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token) {
  if (n <= 0 || hidden <= 0 || seq <= 0) return;
  position_backward_kernel<<<row_blocks(seq), kRowThreads, 0, compute_stream()>>>(dx, dtable, n, hidden, seq,
                                                                                  first_token);
  LATTICE_CUDA_LAUNCHED();
}

}  // namespace lattice::cuda
