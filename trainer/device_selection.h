// Which device this process trains on, chosen once before anything is allocated.
#pragma once

#include <string>

#include "trainer/config.h"

namespace lattice {

// config.device "cpu": nothing to do. "cuda": the binary must have the CUDA backend (else exit 2,
// "built without CUDA") and a visible GPU (else exit 2, "no CUDA device is visible") of compute
// capability 8.0 or later (else exit 2, naming the GPU and what the kernels are built for); the process
// takes GPU local_rank mod visible GPUs, local rank read from the launcher (mpirun or srun), and
// logs which one and whether other ranks share it. Once per process: later calls change nothing.
void select_training_device(const Config& config);

// config.device "cuda" on a binary built without the CUDA backend: the InputError (exit 2) that
// select_training_device gives, for `lattice validate`, which needs no GPU to check a config.
void check_device_built(const Config& config);

// Whether the GELU MLP's GEMMs take their GELU epilogues (training.gelu_fusion) on a device of this
// compute capability (major * 10 + minor; 0: unknown), and why, for the log. "auto" turns them on
// where llm.c does by default (compute capability 9.0 and later; on the H200 they paid 4% in bf16)
// for the bf16 recipe, and leaves them off for f32 (exactness: within 1e-5 of the CPU) and under
// selective recompute (which recomputes the GELU with our own kernel: the forward's bits again only
// when the forward used it too).
struct FusionChoice {
  bool on;
  std::string why;
};
FusionChoice gelu_fusion_choice(const Config& config, int compute_capability);
// The same for training.bias_grad_fusion (a linear layer's bias gradient in its weight-gradient
// GEMM's BGRADB epilogue): "auto" turns it on for the bf16 recipe from compute capability 9.0, as
// gelu_fusion does, and leaves f32 to our own kernel, as gelu_fusion does.
FusionChoice bias_grad_fusion_choice(const Config& config, int compute_capability);

// training.gemm_autotune_dir for this rank (on a GPU; after select_training_device): its file of
// cuBLASLt choices read, or autotuning off when the key is empty. InputError (exit 2) when the file
// was written for another GPU model or cuBLASLt version, or is not such a file.
void start_gemm_autotune(const Config& config, int rank);

}  // namespace lattice
