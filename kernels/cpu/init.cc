// CPU counter-based normal init. Work items are (box row, chunk of the row's last dim), so a 1-D
// box of a huge flat tensor still spreads over threads.
#include "kernels/cpu/init.h"

#include <algorithm>

#include "kernels/counter_rng.h"

namespace lattice::cpu {

void fill_normal(float* x, const std::vector<int64_t>& box_shape, const std::vector<int64_t>& global_shape,
                 const std::vector<int64_t>& box_offset, uint64_t seed, uint64_t stream, float std) {
  const int rank = static_cast<int>(box_shape.size());
  if (rank == 0) {  // a scalar: global index 0
    x[0] = static_cast<float>(rng::normal_from_counter(seed, stream, 0) * std);
    return;
  }
  int64_t numel = 1;
  for (int64_t d : box_shape) numel *= d;
  if (numel == 0) return;
  const int64_t cols = box_shape[rank - 1];
  const int64_t rows = numel / cols;
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  // Global row-major strides.
  std::vector<int64_t> gstride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * global_shape[d + 1];

#pragma omp parallel for if (numel > 4096) schedule(static)
  for (int64_t item = 0; item < rows * chunks; ++item) {
    const int64_t r = item / chunks, c0 = (item % chunks) * kChunk, c1 = std::min(cols, c0 + kChunk);
    // Global index of box element (r, c0): unravel r over the box's leading dims.
    int64_t g = (box_offset[rank - 1] + c0) * gstride[rank - 1];
    int64_t rem = r;
    for (int d = rank - 2; d >= 0; --d) {
      g += (box_offset[d] + rem % box_shape[d]) * gstride[d];
      rem /= box_shape[d];
    }
    float* out = x + r * cols;
    uint64_t cached_block = ~uint64_t{0};
    double z[4];
    for (int64_t c = c0; c < c1; ++c, ++g) {
      const uint64_t ug = static_cast<uint64_t>(g);
      if (ug / 4 != cached_block) {
        cached_block = ug / 4;
        rng::normal4_from_counter(seed, stream, cached_block, z);
      }
      out[c] = static_cast<float>(z[ug % 4] * std);
    }
  }
}

}  // namespace lattice::cpu
