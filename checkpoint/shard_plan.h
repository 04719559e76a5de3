// ShardPlan: which tensor boxes this rank writes in a save — never replicas, and among data-parallel
// replicas (same tp/pp coordinates, same tensors) each box goes to one dp rank, balanced by bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/param_layout.h"

namespace lattice {

struct ShardItem {
  std::string kind;         // kModelKind, kExpAvgKind or kExpAvgSqKind
  size_t param = 0;         // index in the layout
  int64_t flat_offset = 0;  // of the parameter in the flat layout (also the moments')
  int64_t numel = 0;        // elements of the box = a prefix of the local tensor (padding rows follow)
  int64_t staging_offset = 0;  // where the item sits in this rank's host snapshot buffer
};

struct ShardPlan {
  std::vector<ShardItem> items;  // this rank's, in layout order, model before moments per parameter
  int64_t staging_numel = 0;     // sum of the items' numel
};

// Items are every non-replica parameter's box (and its two moment boxes when optimizer_state),
// skipping empty boxes. They are spread over the dp_size replicas by a deterministic greedy
// (largest first onto the least loaded rank), so every dp rank computes the same assignment
// without communicating, and this rank keeps those assigned to dp_rank.
ShardPlan plan_shard(const ParamLayout& layout, bool optimizer_state, int dp_rank, int dp_size);

}  // namespace lattice
