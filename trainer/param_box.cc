// Box copies: one contiguous copy when the box spans whole rows of the global tensor, else one per
// row (a column block of a row-parallel weight). Parameters have at most two dimensions.
#include "trainer/param_box.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

// Calls copy(local_part, global_part) for each contiguous run of the box.
template <typename Copy>
void for_each_box_run(const Tensor& local, const ParamSpec& s, const Tensor& global, Copy copy) {
  LATTICE_CHECK(local.shape() == s.shape && global.shape() == s.global_shape,
                "parameter '{}': box copy between local {} and global {} (spec: local {}, global {})", s.name,
                local.describe(), global.describe(), shape_string(s.shape), shape_string(s.global_shape));
  LATTICE_CHECK(s.shape.size() <= 2, "parameter '{}': box copies handle at most 2 dimensions, got {}", s.name,
                shape_string(s.shape));
  if (s.box_numel() == 0) return;
  if (s.shape.size() <= 1) {
    const int64_t n = s.shape.empty() ? 1 : s.box[0];
    const int64_t at = s.shape.empty() ? 0 : s.offset[0];
    copy(local.slice_flat(0, {n}), global.slice_flat(at, {n}));
    return;
  }
  const int64_t rows = s.box[0], cols = s.box[1], global_cols = s.global_shape[1];
  if (cols == global_cols) {  // whole rows: one run
    copy(local.slice_flat(0, {rows * cols}), global.slice_flat(s.offset[0] * global_cols, {rows * cols}));
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    copy(local.slice_flat(r * s.shape[1], {cols}), global.slice_flat((s.offset[0] + r) * global_cols + s.offset[1], {cols}));
}

}  // namespace

void copy_box_to_global(const Tensor& local, const ParamSpec& spec, Tensor& global) {
  for_each_box_run(local, spec, global, [](const Tensor& l, Tensor g) { ops::copy(l, g); });
}

void copy_box_from_global(const Tensor& global, const ParamSpec& spec, Tensor& local) {
  if (spec.box_numel() != local.numel()) ops::fill(local, 0.0f);  // padding rows
  for_each_box_run(local, spec, global, [](Tensor l, const Tensor& g) { ops::copy(g, l); });
}

}  // namespace lattice
