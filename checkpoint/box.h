// Boxes: axis-aligned regions (offset + shape) of a global tensor, how checkpoints name the piece
// of a tensor a file holds, and the strided host copy of one box's part into another's storage.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

struct Box {
  Shape offset;  // first element in the global tensor, per dimension
  Shape shape;   // extent per dimension (rank = the global tensor's; 0-d tensors: both empty)

  int64_t numel() const { return shape_numel(shape); }
  bool operator==(const Box&) const = default;
};

// "[0:4, 8:16]" — global index ranges, for messages.
std::string box_string(const Box& box);

// The common part of two boxes of one tensor (numel() == 0 when they are disjoint).
Box intersect(const Box& a, const Box& b);

// The boxes (coordinates within a row-major tensor of `shape`) that together hold its elements
// [begin, end) in row-major order: at most two per dimension, none empty, in element order. A flat
// range of a parameter — a distributed-optimizer shard cuts parameters anywhere — as boxes that
// resharding can intersect.
std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end);

// Whether `box` lies inside a tensor of `global_shape`.
bool box_fits(const Box& box, const Shape& global_shape);

// Copies `region` (global coordinates, inside both boxes) from a row-major buffer holding box
// `src_box` into a row-major buffer of shape `dst_shape` whose element 0 is global `dst_offset`
// (dst_shape may extend past the box: the padding rows of a local tensor). One memcpy per
// contiguous run; host memory only (checkpoint staging), elements of `elem_bytes` each.
void copy_region(const void* src, const Box& src_box, void* dst, const Shape& dst_offset, const Shape& dst_shape,
                 const Box& region, size_t elem_bytes);

}  // namespace lattice
