// Copies between a rank's local parameter tensor and the whole (one-process) tensor: the box the
// rank holds (ParamSpec offset + box) — for loading a full HF file into a sharded layout and for
// gathering the shards back for export. Setup-time code, not the training step.
#pragma once

#include "kernels/tensor.h"
#include "model/parameter_store.h"

namespace lattice {

// global[offset : offset + box] = local[: box]. `global` has spec.global_shape; padding rows of
// `local` past the box are not copied.
void copy_box_to_global(const Tensor& local, const ParamSpec& spec, Tensor& global);
// local[: box] = global[offset : offset + box]; padding rows past the box are set to zero.
void copy_box_from_global(const Tensor& global, const ParamSpec& spec, Tensor& local);

}  // namespace lattice
