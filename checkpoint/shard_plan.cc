// Greedy byte balancing of checkpoint items over data-parallel replicas.
#include "checkpoint/shard_plan.h"

#include <algorithm>
#include <numeric>

#include "checkpoint/checkpoint_format.h"
#include "kernels/error.h"

namespace lattice {

ShardPlan plan_shard(const ParamLayout& layout, bool optimizer_state, int dp_rank, int dp_size) {
  LATTICE_CHECK(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size, "dp rank {} of {}", dp_rank, dp_size);
  std::vector<ShardItem> all;
  for (size_t i = 0; i < layout.count(); ++i) {
    const ParamSpec& s = layout.spec(i);
    const int64_t flat = layout.offset(i), box = s.box_numel();
    if (!s.replica && box > 0) {
      all.push_back({kModelKind, i, flat, box, 0});
      if (optimizer_state) {
        all.push_back({kExpAvgKind, i, flat, box, 0});
        all.push_back({kExpAvgSqKind, i, flat, box, 0});
      }
    }
  }
  // Largest first (ties: layout order) onto the least loaded rank (ties: the lowest rank).
  std::vector<size_t> order(all.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a].numel > all[b].numel; });
  std::vector<int64_t> load(static_cast<size_t>(dp_size), 0);
  std::vector<bool> mine(all.size(), false);
  for (const size_t k : order) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += all[k].numel;
    mine[k] = static_cast<int>(r) == dp_rank;
  }
  ShardPlan plan;
  for (size_t k = 0; k < all.size(); ++k) {
    if (!mine[k]) continue;
    all[k].staging_offset = plan.staging_numel;
    plan.staging_numel += all[k].numel;
    plan.items.push_back(all[k]);
  }
  return plan;
}

}  // namespace lattice
