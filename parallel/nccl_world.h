// The NCCL transport for a parallel job's groups (parallel.backend "nccl"): the world communicator
// whose CUDA-tensor collectives go through NCCL, and every group split from it likewise. Built only
// with --config=cuda; a CPU-only build says so.
#pragma once

#include <memory>
#include <string>

#include "parallel/communicator.h"
#include "parallel/mpi_communicator.h"

namespace lattice {

// Wraps the job's MPI world: MPI stays the bootstrap (each group's NCCL id travels over it), the host
// channel, and the transport of CPU tensors. Collective over the world. `most_ranks_on_a_gpu` is the
// job's (trainer/gpu_sharing.h): NCCL needs a GPU per rank, so more than 1 is an InputError naming
// parallel.backend (MPI, host-staged, is the way to share a GPU). A CPU-only build throws
// InputError "built without CUDA".
std::unique_ptr<Communicator> nccl_world(std::unique_ptr<MpiCommunicator> mpi_world, int most_ranks_on_a_gpu);

// Why NCCL cannot carry the job's CUDA tensors ("2 ranks share one GPU and NCCL needs a GPU per
// rank", "this binary was built without CUDA"), or "" when it can: nccl_world's refusal, and
// parallel.backend "auto"'s choice between NCCL and MPI.
std::string nccl_unfit_reason(int most_ranks_on_a_gpu);

// "NCCL 2.28.3": the library this process loaded (a CPU-only build: "").
std::string nccl_version();

}  // namespace lattice
