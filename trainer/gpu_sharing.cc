#include "trainer/gpu_sharing.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <spdlog/spdlog.h>

namespace lattice {

GpuSharing gpu_sharing(const Backend& backend, HostChannel& world) {
  const std::vector<std::array<uint8_t, 16>> uuids = world.all_gather(backend.device_uuid(), "the ranks' GPU UUIDs");
  GpuSharing sharing;
  for (const auto& uuid : uuids) {
    sharing.most = std::max(sharing.most, static_cast<int>(std::count(uuids.begin(), uuids.end(), uuid)));
  }
  sharing.mine = static_cast<int>(std::count(uuids.begin(), uuids.end(), uuids[static_cast<size_t>(world.rank())]));
  if (sharing.mine > 1) spdlog::info("cuda: {} ranks of this job share this rank's GPU", sharing.mine);
  return sharing;
}

}  // namespace lattice
