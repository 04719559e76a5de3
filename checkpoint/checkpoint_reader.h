// Loading sharded checkpoints into any layout: every file this rank needs is verified (size,
// CRC-32, safetensors structure) before it is trusted, the model config is compared, and this
// rank's boxes are filled from the stored boxes they intersect (resharding = box intersection).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/parameter_store.h"
#include "parallel/param_layout.h"

namespace lattice {

// The parsed and structurally checked metadata.json of an iteration directory (see
// resolve_checkpoint in checkpoint_dir.h for `latest` and roots). InputError naming the file on
// any defect.
CheckpointMetadata read_checkpoint_metadata(const std::string& checkpoint_dir);

// Compares the `model` sections of two resolved configs (model.init_from is ignored: it only
// matters for a fresh start). Throws one InputError listing every differing field, e.g.
// "model.hidden_size: checkpoint 64, config 32", then `what_to_do` (which depends on the command:
// training can start without the checkpoint, an export can drop the config).
void check_model_config(const nlohmann::json& checkpoint_config, const nlohmann::json& config,
                        const std::string& checkpoint_dir, const std::string& what_to_do);

// A part of the flat layout a load fills: elements [flat_offset, flat_offset + numel) land at
// target_offset of the targets — of the values at values_offset instead, when that is set (the
// distributed optimizer's fp32 main parameters, which are the flat parameters themselves).
struct LoadRange {
  int64_t flat_offset = 0;
  int64_t numel = 0;
  int64_t target_offset = 0;
  int64_t values_offset = -1;  // -1: target_offset
  int64_t values_at() const { return values_offset < 0 ? target_offset : values_offset; }
};

// What a load read: the checksums it verified cover these bytes, and it copies only from them.
struct LoadReport {
  uint64_t bytes_read = 0;        // the boxes it reads (whole files for checkpoints without box checksums)
  uint64_t checkpoint_bytes = 0;  // all of the checkpoint's files
};

// What a load fills: the parameter values (replicas too; in training, the optimizer's fp32 main
// parameters) and, when given, the AdamW moments. Without `ranges`, all of this rank's `layout`, in
// its flat order (numel == layout->numel() each). With them, only those disjoint ranges, into
// targets of `target_numel` elements each (a distributed-optimizer rank's shard: nothing holds the
// whole model's state) — the values of any size their ranges' values_offset reach, where those are
// set; the rest of the targets ends up zero.
struct LoadTargets {
  const ParamLayout* layout = nullptr;
  Tensor* values = nullptr;
  Tensor* exp_avg = nullptr;
  Tensor* exp_avg_sq = nullptr;
  std::vector<LoadRange> ranges;
  int64_t target_numel = 0;
  LoadReport* report = nullptr;  // when set, what the load read
};

// Loads the iteration directory `checkpoint_dir` into `targets`, whatever layout wrote it.
// `config` (the resolved run config) is checked against the checkpoint's model section unless it is
// null. Padding rows past each box are zero afterwards. Missing/truncated/corrupt files, a missing
// tensor, a different global shape, moments asked of a checkpoint without them: InputError naming
// the file or tensor, and the targets are untouched (everything is verified before any copy).
// Every file it reads from is checked for presence, size and structure; checksums are verified
// for the boxes it reads (so a rank loading its shard reads about its share of the checkpoint,
// and a damaged box is found by the ranks that need it), or for whole files where the checkpoint
// has no box checksums.
// Returns the metadata: the training state, the layout and the config that wrote it.
CheckpointMetadata load_checkpoint(const std::string& checkpoint_dir, const nlohmann::json& config,
                                   const LoadTargets& targets);

// Consolidation: the checkpoint (any layout) as the one-process store of `model`
// (model_parameter_specs(model)), e.g. for the Hugging Face export. No config check: pass the
// model section the checkpoint itself holds.
std::unique_ptr<ParameterStore> consolidate_checkpoint(const std::string& checkpoint_dir, const ModelConfig& model);

}  // namespace lattice
