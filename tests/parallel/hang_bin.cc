// The watchdog end to end, under mpirun; argv[1] is the timeout (seconds), argv[2] the case:
//  tp (default): on a TP2 x DP(world/2) grid every rank but rank 1 enters an all_reduce on its tp
//    group; rank 1 never does.
//  world: every rank but the last enters an all_reduce on the world.
//  cycle (2 ranks): each rank receives from the other and neither sends: a deadlock.
// The watchdog must end the whole job with exit code 3 and a message naming rank, group and
// operation, followed by the census of the ranks it waits for (hang_test.sh checks both).
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "parallel/grid.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"
#include "trainer/logging_setup.h"

namespace {

// Stops participating: sleeps far past the timeout (the job must end before this returns).
void never_join(int rank) {
  std::this_thread::sleep_for(std::chrono::seconds(60));
  spdlog::error("rank {} woke up: the watchdog did not end the job", rank);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lattice;
  MpiRuntime mpi(&argc, &argv);
  const double timeout_s = argc > 1 ? std::atof(argv[1]) : 2.0;
  const std::string which = argc > 2 ? argv[2] : "tp";
  auto watchdog = std::make_shared<Watchdog>(timeout_s);
  auto world = mpi.world(watchdog);
  RankGrid grid(mpi.world_size(), mpi.rank(), 2, 1);
  setup_logging(grid.rank(), grid.tp_rank(), grid.pp_rank(), grid.dp_rank());
  ProcessGroups groups = make_process_groups(grid, *world);
  world->barrier();
  // Rank 0 must be the first to time out (the test checks its message): the others wait longer.
  if (mpi.rank() != 0) watchdog->set_timeout_s(3 * timeout_s);
  Tensor t = Tensor::zeros({1024});
  if (which == "world") {
    if (mpi.rank() == mpi.world_size() - 1) {
      never_join(mpi.rank());
      return 0;
    }
    world->all_reduce(t);
  } else if (which == "cycle") {
    watchdog->set_timeout_s(timeout_s);  // both time out together and ask each other
    groups.tp->recv_async(t, 1 - groups.tp->rank()).wait();
  } else {
    if (mpi.rank() == 1) {
      never_join(1);
      return 0;
    }
    groups.tp->all_reduce(t);
    // Ranks whose tp peer is not rank 1 complete; they then wait on the world, which rank 1 never
    // joins: their watchdogs fire too (a barrier on group 'world').
    world->barrier();
  }
  spdlog::error("rank {} passed the hang: the watchdog did not end the job", mpi.rank());
  return 0;
}
