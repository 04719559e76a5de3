// The watchdog end to end: run under mpirun, every rank but rank 1 enters an all_reduce on the
// tp group of a TP2 x DP(world/2) grid; rank 1 never does. The watchdog (timeout from argv[1],
// seconds) must end the whole job with exit code 3 and a message naming rank, group and operation.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "parallel/grid.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"
#include "trainer/logging_setup.h"

int main(int argc, char** argv) {
  using namespace lattice;
  MpiRuntime mpi(&argc, &argv);
  double timeout_s = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto watchdog = std::make_shared<Watchdog>(timeout_s);
  auto world = mpi.world(watchdog);
  RankGrid grid(mpi.world_size(), mpi.rank(), 2, 1);
  setup_logging(grid.rank(), grid.tp_rank(), grid.pp_rank(), grid.dp_rank());
  ProcessGroups groups = make_process_groups(grid, *world);
  world->barrier();
  if (mpi.rank() == 1) {
    // Stops participating: sleeps far past the timeout (the job must end before this returns).
    std::this_thread::sleep_for(std::chrono::seconds(60));
    spdlog::error("rank 1 woke up: the watchdog did not end the job");
    return 0;
  }
  // Rank 0 must be the first to time out (the test checks its message): the others wait longer.
  if (mpi.rank() != 0) watchdog->set_timeout_s(3 * timeout_s);
  Tensor t = Tensor::zeros({1024});
  groups.tp->all_reduce(t);
  // Ranks whose tp peer is not rank 1 complete; they then wait on the world, which rank 1 never
  // joins: their watchdogs fire too (a barrier on group 'world').
  world->barrier();
  spdlog::error("rank {} passed the barrier: the watchdog did not end the job", mpi.rank());
  return 0;
}
