#include "trainer/gpu_sharing.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <spdlog/spdlog.h>

namespace lattice {

GpuSharing gpu_sharing(const Backend& backend, HostChannel& world) {
  std::vector<std::array<uint8_t, 16>> uuids = world.all_gather(backend.device_uuid(), "the ranks' GPU UUIDs");
  const std::array<uint8_t, 16> mine = uuids[static_cast<size_t>(world.rank())];
  std::sort(uuids.begin(), uuids.end());  // equal UUIDs side by side: O(n log n) for jobs of thousands of ranks
  GpuSharing sharing;
  for (auto run = uuids.begin(); run != uuids.end();) {
    const auto end = std::upper_bound(run, uuids.end(), *run);
    const int ranks = static_cast<int>(end - run);
    sharing.most = std::max(sharing.most, ranks);
    if (*run == mine) sharing.mine = ranks;
    run = end;
  }
  if (sharing.mine > 1) spdlog::info("cuda: {} ranks of this job share this rank's GPU", sharing.mine);
  return sharing;
}

}  // namespace lattice
