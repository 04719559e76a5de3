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
// channel, and the transport of CPU tensors. Collective over the world. `ranks_per_node` is the
// launcher's: NCCL needs a GPU per rank, so more ranks on a node than visible GPUs is an InputError
// naming parallel.backend (MPI, host-staged, is the way to share a GPU). A CPU-only build throws
// InputError "built without CUDA".
std::unique_ptr<Communicator> nccl_world(std::unique_ptr<MpiCommunicator> mpi_world, int ranks_per_node);

// Why NCCL cannot carry this rank's CUDA tensors ("12 ranks share this node's 8 visible GPU(s)", "this
// binary was built without CUDA"), or "" when it can: nccl_world's refusal, and parallel.backend
// "auto"'s choice between NCCL and MPI. Local to the node: the caller makes every rank agree.
std::string nccl_unfit_reason(int ranks_per_node);

}  // namespace lattice
