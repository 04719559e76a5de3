// Which device this process trains on, chosen once before anything is allocated.
#pragma once

#include "trainer/config.h"

namespace lattice {

// config.device "cpu": nothing to do. "cuda": the binary must have the CUDA backend (else exit 2,
// "built without CUDA") and a visible GPU (else exit 2, "no CUDA device is visible"); the process
// takes GPU local_rank mod visible GPUs, local rank read from the launcher (mpirun or srun), and
// logs which one and whether other ranks share it. Once per process: later calls change nothing.
void select_training_device(const Config& config);

// training.gemm_autotune_dir for this rank (on a GPU; after select_training_device): its file of
// cuBLASLt choices read, or autotuning off when the key is empty. InputError (exit 2) when the file
// was written for another GPU model or cuBLASLt version, or is not such a file.
void start_gemm_autotune(const Config& config, int rank);

}  // namespace lattice
