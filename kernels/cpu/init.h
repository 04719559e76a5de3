// CPU initialization kernels: counter-based normal fill of a box of a global tensor.
#pragma once

#include <cstdint>
#include <vector>

namespace lattice::cpu {

// x (row-major, shape box_shape) is the box of a tensor of global_shape starting at box_offset;
// x[e] = normal_from_counter(seed, stream, global_index(e)) * std. All three shapes have equal rank.
void fill_normal(float* x, const std::vector<int64_t>& box_shape, const std::vector<int64_t>& global_shape,
                 const std::vector<int64_t>& box_offset, uint64_t seed, uint64_t stream, float std);

}  // namespace lattice::cpu
