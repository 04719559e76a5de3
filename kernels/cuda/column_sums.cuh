// Deterministic sums over the rows of [rows, cols] data, per column, without atomics: the norm
// parameter gradients (kernels/cuda/norm.cu) and the bias gradient (elementwise.cu).
//
// Stage 1: blocks of (32 packs of 8 columns, 8 row lanes), one per (256 columns, row chunk), sum
// each column's per-row terms in double, every lane over its rows in order, then the 8 lanes in
// order, into partials [planes][chunks][cols] (scratch from the stream-ordered pool). Stage 2:
// grad[c] += the chunks' partials of c, added in chunk order, rounded once to the gradient's type.
// The chunking depends on (rows, cols) alone, so a shape always gives the same bits: as many chunks
// as would give about 2048 blocks of 32 columns (a thread per column over all rows would leave the
// memory system idle and sum in float). A block now covers 8 of those tiles with 16-byte loads, so
// about 256 blocks run (768 columns: 3 x 85), with about as many bytes in flight as the 2048 blocks
// of 2-byte loads they replaced; the chunking stayed so that the bits did.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/typed_access.cuh"

namespace lattice::cuda {
// Internal to each .cu that includes it: each has its own copy of the kernels, so no kernel's host
// stub is shared between two separately compiled device modules.
namespace {

constexpr int kColumnTileCols = 32;  // one warp wide: coalesced
constexpr int kColumnRowLanes = 8;
constexpr int64_t kColumnTargetBlocks = 2048;
constexpr int kColumnFinishThreads = 256;

// Pool scratch released in stream order when the host function returns (release never throws).
struct Scratch {
  void* ptr;
  explicit Scratch(size_t bytes) : ptr(allocate(bytes)) {}
  ~Scratch() { release(ptr); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The gradients the planes accumulate into, one per plane (passed to the finish kernel by value).
template <int kPlanes>
struct ColumnGrads {
  DataOut plane[kPlanes];
};

// Up to kMaxProducts column sums of one shape, run by one launch of each kernel (blockIdx.z picks
// the product; the q, k and v bias gradients): each is summed exactly as it would be alone.
template <int kPlanes, class Terms, int kMaxProducts>
struct ColumnGroup {
  Terms terms[kMaxProducts];
  ColumnGrads<kPlanes> grads[kMaxProducts];
  int count;
};

// terms(r, c, count, acc) adds row r's kPlanes terms of columns c .. c + count to acc[0 .. count)
// (count <= kPack, c + count <= cols, r < rows). A thread covers the kPack columns of one pack (16-byte
// loads where aligned; element access left the loads latency-bound), a block kColumnTileCols packs;
// each column is still summed over its rows in the order the 32-column tiling gave, so the sums are
// bitwise those of a thread per column.
// Product blockIdx.z's partials are partials[blockIdx.z][planes][chunks][cols].
template <int kPlanes, class Terms, int kMaxProducts>
__global__ void column_partials_kernel(ColumnGroup<kPlanes, Terms, kMaxProducts> group, int64_t rows, int64_t cols,
                                       int64_t chunks, int64_t rows_per_chunk, double* partials) {
  constexpr int kBlockCols = kColumnTileCols * kPack;
  // The block's kColumnTileCols x kColumnRowLanes threads finish its kBlockCols columns one each.
  static_assert(kColumnTileCols * kColumnRowLanes == kBlockCols, "one finishing thread per column");
  __shared__ double sh[kPlanes][kColumnRowLanes][kBlockCols];
  const Terms& terms = group.terms[blockIdx.z];
  partials += static_cast<int64_t>(blockIdx.z) * kPlanes * chunks * cols;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t block_c = static_cast<int64_t>(blockIdx.x) * kBlockCols;
  const int64_t c = block_c + static_cast<int64_t>(tx) * kPack;
  const int count = c < cols ? (cols - c < kPack ? static_cast<int>(cols - c) : kPack) : 0;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  double acc[kPack][kPlanes] = {};
  if (count > 0) {
    // Unrolled so that the next rows' loads can issue before this row's adds (acc is registers).
#pragma unroll 4
    for (int64_t r = r0 + ty; r < r1; r += kColumnRowLanes) terms(r, c, count, acc);
  }
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    for (int p = 0; p < kPlanes; ++p) sh[p][ty][tx * kPack + k] = acc[k][p];
  }
  __syncthreads();
  // Every thread of the block finishes one column of the block's: its row lanes, in order.
  const int j = ty * kColumnTileCols + tx;
  if (block_c + j < cols) {
    for (int p = 0; p < kPlanes; ++p) {
      double t = 0.0;
      for (int k = 0; k < kColumnRowLanes; ++k) t += sh[p][k][j];
      partials[(p * chunks + static_cast<int64_t>(blockIdx.y)) * cols + block_c + j] = t;
    }
  }
}

// grads.plane[p][c] += the sum over chunks (in order) of partials[p, chunk, c], for product
// blockIdx.z. The loads go eight at a time ahead of their adds: a column's chunks are ~85 loads that
// one at a time wait in turn.
template <int kPlanes, class Terms, int kMaxProducts>
__global__ void column_finish_kernel(const double* partials, int64_t chunks, int64_t cols,
                                     ColumnGroup<kPlanes, Terms, kMaxProducts> group) {
  constexpr int kAhead = 8;
  const ColumnGrads<kPlanes>& grads = group.grads[blockIdx.z];
  partials += static_cast<int64_t>(blockIdx.z) * kPlanes * chunks * cols;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int p = 0; p < kPlanes; ++p) {
      const double* column = partials + p * chunks * cols + c;
      double s = 0.0;
      int64_t k = 0;
      for (; k + kAhead <= chunks; k += kAhead) {
        double v[kAhead];
#pragma unroll
        for (int u = 0; u < kAhead; ++u) v[u] = column[(k + u) * cols];
#pragma unroll
        for (int u = 0; u < kAhead; ++u) s += v[u];
      }
      for (; k < chunks; ++k) s += column[k * cols];
      store(grads.plane[p], c, load(grads.plane[p], c) + static_cast<float>(s));
    }
  }
}

// Accumulates each product's column sums into its grads on the compute stream. 1 <= group.count <=
// kMaxProducts; cols > 0; rows >= 0 (no rows still adds +0.0f to every gradient, as the CPU loops do).
template <int kPlanes, class Terms, int kMaxProducts>
void column_sums(const ColumnGroup<kPlanes, Terms, kMaxProducts>& group, int64_t rows, int64_t cols) {
  const int64_t col_tiles = (cols + kColumnTileCols - 1) / kColumnTileCols;
  // Enough row chunks for ~kColumnTargetBlocks blocks, each chunk at least one row per lane. A
  // product's chunking depends on (rows, cols) alone, not on the group it runs in: its bits neither.
  int64_t chunks = std::max<int64_t>(1, kColumnTargetBlocks / col_tiles);
  chunks = std::min<int64_t>(chunks, (rows + kColumnRowLanes - 1) / kColumnRowLanes);
  chunks = std::clamp<int64_t>(chunks, 1, 65535);  // gridDim.y limit
  const int64_t rows_per_chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  chunks = std::max<int64_t>(1, (rows + rows_per_chunk - 1) / rows_per_chunk);
  const auto count = static_cast<unsigned>(group.count);
  Scratch scratch(count * static_cast<size_t>(kPlanes) * static_cast<size_t>(chunks * cols) * sizeof(double));
  auto* partials = static_cast<double*>(scratch.ptr);
  // The chunking above stays that of 32-column tiles (a shape's bits do not change); a block covers
  // kPack of those tiles.
  const int64_t block_tiles = (cols + kColumnTileCols * kPack - 1) / (kColumnTileCols * kPack);
  const dim3 grid(static_cast<unsigned>(block_tiles), static_cast<unsigned>(chunks), count);
  const dim3 block(kColumnTileCols, kColumnRowLanes);
  column_partials_kernel<<<grid, block, 0, compute_stream()>>>(group, rows, cols, chunks, rows_per_chunk, partials);
  LATTICE_CUDA_LAUNCHED();
  const dim3 finish_grid(grid_for(cols, kColumnFinishThreads), 1, count);
  column_finish_kernel<<<finish_grid, kColumnFinishThreads, 0, compute_stream()>>>(partials, chunks, cols, group);
  LATTICE_CUDA_LAUNCHED();
}

// One product's column sums.
template <int kPlanes, class Terms>
void column_sums(Terms terms, int64_t rows, int64_t cols, ColumnGrads<kPlanes> grads) {
  column_sums(ColumnGroup<kPlanes, Terms, 1>{{terms}, {grads}, 1}, rows, cols);
}

}  // namespace
}  // namespace lattice::cuda
