// The memory a run needs (the memory plan's largest rank, memory_plan.h) against what the machine has:
// physical memory, or a container's cgroup limit, shared by the ranks of one node; on a GPU, the
// device's memory, shared by the ranks that share the GPU. `lattice validate` warns (host memory),
// `lattice train` refuses to start (exit 2) unless --ignore-memory-check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "trainer/config.h"
#include "trainer/memory_plan.h"

namespace lattice {

// Memory available to this process and where the figure comes from.
struct MachineMemory {
  int64_t bytes = 0;
  std::string source;  // "physical memory", the cgroup file that limits it, or the GPU's model
  bool gpu = false;    // a GPU's memory: its ranks are those sharing the GPU, not the node's
};

// Physical memory (sysconf), lowered to the cgroup limit when one is set (cgroup v2 memory.max,
// cgroup v1 memory.limit_in_bytes).
MachineMemory host_memory();

// Ranks of this job sharing one node, as mpirun or srun says (trainer/launcher_env.h), else 1.
int ranks_per_node();

// The selected GPU's memory (the device is selected first: trainer/device_selection.h); the ranks
// that share it are trainer/gpu_sharing.h's.
MachineMemory device_memory(const Backend& backend);

// What this run's bf16 attention takes on the selected device beyond the plan's own items (cuDNN's
// workspace, which cuDNN sizes as it builds the graphs), for plan_memory; nullopt for a run that is
// not bf16 on a device that can say. reserve_attention_workspace allocates it now (before step 1).
std::optional<int64_t> device_attention_workspace(const Backend& backend, const Config& c,
                                                  const ParallelLayout& layout);
void reserve_attention_workspace(const Backend& backend, const Config& c, const ParallelLayout& layout);

// nullopt when `ranks` ranks of the plan's largest `rank` fit in `available`, else a message with the
// figures (the rank's items, in all for the node's ranks, available and its source) and what to change.
std::optional<std::string> memory_shortfall(const RankMemoryPlan& rank, int ranks, const MachineMemory& available);

}  // namespace lattice
