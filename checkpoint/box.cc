// Box arithmetic and the region copy behind resharding.
#include "checkpoint/box.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

std::string box_string(const Box& box) {
  std::string out = "[";
  for (size_t d = 0; d < box.shape.size(); ++d) {
    if (d > 0) out += ", ";
    out += fmt::format("{}:{}", box.offset[d], box.offset[d] + box.shape[d]);
  }
  return out + "]";
}

Box intersect(const Box& a, const Box& b) {
  LATTICE_CHECK(a.shape.size() == b.shape.size(), "boxes of different rank: {} and {}", box_string(a),
                box_string(b));
  Box out;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    const int64_t begin = std::max(a.offset[d], b.offset[d]);
    const int64_t end = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    out.offset.push_back(begin);
    out.shape.push_back(std::max<int64_t>(0, end - begin));
  }
  return out;
}

namespace {

// Appends the boxes of elements [begin, end) of the sub-tensor at `prefix` (the leading indices)
// whose dimensions are shape[d..].
void append_range_boxes(const Shape& shape, size_t d, Shape prefix, int64_t begin, int64_t end,
                        std::vector<Box>& out) {
  if (begin >= end) return;
  int64_t row = 1;  // elements per index of dimension d
  for (size_t k = d + 1; k < shape.size(); ++k) row *= shape[k];
  const auto box_of = [&](int64_t first, int64_t count) {
    Box b;
    b.offset = prefix;
    b.shape = Shape(prefix.size(), 1);
    b.offset.push_back(first);
    b.shape.push_back(count);
    for (size_t k = d + 1; k < shape.size(); ++k) {
      b.offset.push_back(0);
      b.shape.push_back(shape[k]);
    }
    return b;
  };
  const int64_t first = begin / row, last = (end - 1) / row;  // the indices of dimension d touched
  // A partial first index, the whole indices between, a partial last index.
  int64_t whole_begin = first, whole_end = last + 1;
  if (begin % row != 0) {
    prefix.push_back(first);
    append_range_boxes(shape, d + 1, prefix, begin % row, first == last ? end - first * row : row, out);
    prefix.pop_back();
    whole_begin = first + 1;
  }
  if (whole_begin > last) return;
  const bool last_partial = end % row != 0;
  if (last_partial) whole_end = last;
  if (whole_end > whole_begin) out.push_back(box_of(whole_begin, whole_end - whole_begin));
  if (last_partial) {
    prefix.push_back(last);
    append_range_boxes(shape, d + 1, prefix, 0, end - last * row, out);
  }
}

}  // namespace

std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end) {
  LATTICE_CHECK(0 <= begin && begin <= end && end <= shape_numel(shape), "flat_range_boxes: [{}, {}) of {} elements",
                begin, end, shape_numel(shape));
  std::vector<Box> out;
  if (begin == end) return out;
  if (shape.empty()) return {Box{}};
  append_range_boxes(shape, 0, {}, begin, end, out);
  return out;
}

bool box_fits(const Box& box, const Shape& global_shape) {
  if (box.offset.size() != global_shape.size() || box.shape.size() != global_shape.size()) return false;
  for (size_t d = 0; d < global_shape.size(); ++d)
    // Compared without adding offset + shape, which could overflow for a damaged checkpoint.
    if (box.offset[d] < 0 || box.shape[d] < 0 || box.offset[d] > global_shape[d] ||
        box.shape[d] > global_shape[d] - box.offset[d])
      return false;
  return true;
}

void copy_region(const void* src, const Box& src_box, void* dst, const Shape& dst_offset, const Shape& dst_shape,
                 const Box& region, size_t elem_bytes) {
  const size_t rank = region.shape.size();
  LATTICE_CHECK(src_box.shape.size() == rank && dst_shape.size() == rank && dst_offset.size() == rank,
                "copy_region: rank mismatch");
  if (region.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem_bytes);
    return;
  }
  // Row-major strides (in elements) of both buffers.
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_box.shape[d];
    dst_stride[d - 1] = dst_stride[d] * dst_shape[d];
  }
  // Trailing dimensions that the region spans fully in both buffers merge into one contiguous run.
  size_t inner = rank - 1;
  while (inner > 0 && region.shape[inner] == src_box.shape[inner] && region.shape[inner] == dst_shape[inner]) --inner;
  int64_t run = 1;
  for (size_t d = inner; d < rank; ++d) run *= region.shape[d];
  const size_t run_bytes = static_cast<size_t>(run) * elem_bytes;

  // Odometer over the dimensions before `inner`.
  std::vector<int64_t> index(inner, 0);
  const auto* s = static_cast<const char*>(src);
  auto* t = static_cast<char*>(dst);
  while (true) {
    int64_t src_el = 0, dst_el = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t g = region.offset[d] + (d < inner ? index[d] : 0);
      src_el += (g - src_box.offset[d]) * src_stride[d];
      dst_el += (g - dst_offset[d]) * dst_stride[d];
    }
    std::memcpy(t + dst_el * elem_bytes, s + src_el * elem_bytes, run_bytes);
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < region.shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace lattice
