// Catch2 main for tests run under mpirun: initializes MPI, runs the same test cases on every rank,
// and fails (on every rank) if any rank failed, or if its filter matched no test case. A hang ends
// the job through the watchdog (20 s).
#define CATCH_CONFIG_RUNNER
#include "tests/catch_session.h"

#include <cstdio>
#include <memory>

#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice::testing {
namespace {
MpiCommunicator* g_world = nullptr;
}
MpiCommunicator& world() { return *g_world; }
}  // namespace lattice::testing

int main(int argc, char** argv) {
  lattice::MpiRuntime mpi(&argc, &argv);
  int failures = 0;
  {
    auto watchdog = std::make_shared<lattice::Watchdog>(20.0);
    auto world = mpi.world(watchdog);
    lattice::testing::g_world = world.get();
    failures = lattice::testing::run_catch_session(argc, argv);
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mpi.rank() == 0) {
      std::printf("%d ranks: %d failed test case(s) summed over all ranks\n", mpi.world_size(), any);
    }
    failures = any;
    lattice::testing::g_world = nullptr;
  }
  return failures == 0 ? 0 : 1;
}
