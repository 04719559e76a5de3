// nccl_world in a build without CUDA (see nccl_world.h).
#include "parallel/nccl_world.h"

namespace lattice {

std::unique_ptr<Communicator> nccl_world(std::unique_ptr<MpiCommunicator>, int) {
  throw InputError("parallel.backend is \"nccl\" but this binary was built without CUDA: build with --config=cuda, "
                   "or set parallel.backend to \"mpi\"");
}

std::string nccl_unfit_reason(int) { return "this binary was built without CUDA"; }

std::string nccl_version() { return ""; }

}  // namespace lattice
