// Shared by the multi-rank Catch2 binaries: the world communicator set up by mpi_test_main.cc.
#pragma once

#include "parallel/mpi_communicator.h"

namespace lattice::testing {

MpiCommunicator& world();

}  // namespace lattice::testing
