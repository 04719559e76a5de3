// ParamSpec: one parameter as this rank holds it (global name, local and global shape, its box of
// the global tensor, init rule, decay and replica flags). Below model/ and parallel/: both use it.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tensor.h"

namespace lattice {

enum class InitKind { kNormal, kZeros, kOnes };

// One parameter as this rank holds it. Under tensor parallelism a rank holds a box (offset +
// extent) of the global tensor; the local tensor may have padding rows past the box (the
// vocabulary padded to a multiple of 128 x TP): padding is zero, gets zero gradient and is not
// part of the global tensor. Without sharding, global_shape = shape, offset = 0, box = shape.
struct ParamSpec {
  std::string name;    // global name, e.g. "layers.3.attention.q_proj.weight"
  Shape shape;         // shape of this rank's local tensor (padding included)
  InitKind init = InitKind::kNormal;
  float init_std = 0.02f;
  bool weight_decay = false;  // matrices (embeddings, linear weights) only
  Shape global_shape;  // the whole tensor; empty = shape
  Shape offset;        // where the local tensor starts in the global tensor; empty = zeros
  // Extent of the global tensor held here (leading part of the local tensor); empty = shape. It
  // may be empty (0 rows): a tp rank whose vocabulary rows are all padding (tiny vocabularies);
  // its offset may then lie past the end of the global tensor.
  Shape box;
  // Another rank of this rank's tp group or pipeline holds the same values (TP-duplicated norm
  // gains and row-parallel biases on tp rank > 0; the tied LM head on the last pipeline stage):
  // such a copy is not counted in the gradient norm and not written to checkpoints.
  bool replica = false;
  // Same value on every tp rank, with a gradient computed from this rank's share of the tokens
  // under sequence parallelism: its gradient must be summed over the tp group.
  bool tp_duplicated = false;

  // The fields above with their defaults filled in (done by ParamLayout).
  void fill_defaults();
  // Elements of the local tensor (padding included) and of the box.
  int64_t numel() const { return shape_numel(shape); }
  int64_t box_numel() const { return shape_numel(box); }
};

}  // namespace lattice
