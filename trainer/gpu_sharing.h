// Which ranks of a job run on one GPU. Local rank mod visible GPUs does not say: CUDA_VISIBLE_DEVICES
// may show each rank a different GPU as its device 0 (Slurm's --gpus-per-task=1, or a wrapper that
// binds each rank), so every rank reports its GPU's UUID and the ranks compare them.
#pragma once

#include "kernels/backend.h"
#include "parallel/host_channel.h"

namespace lattice {

struct GpuSharing {
  int mine = 1;  // ranks on this rank's GPU, itself included
  int most = 1;  // the most ranks on any one GPU of the job
};

// Collective over `world` (every rank calls it, each with its device selected): the UUIDs compared.
GpuSharing gpu_sharing(const Backend& backend, HostChannel& world);

}  // namespace lattice
