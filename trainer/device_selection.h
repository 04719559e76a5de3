// Which device this process trains on, chosen once before anything is allocated.
#pragma once

#include "trainer/config.h"

namespace lattice {

// config.device "cpu": nothing to do. "cuda": the binary must have the CUDA backend (else exit 2,
// "built without CUDA") and a visible GPU (else exit 2, "no CUDA device is visible"); the process
// takes GPU local_rank mod visible GPUs, local rank read from the launcher (mpirun or srun), and
// logs which one and whether other ranks share it. Once per process: later calls change nothing.
void select_training_device(const Config& config);

}  // namespace lattice
