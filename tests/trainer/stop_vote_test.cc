// StopRequest under mpirun (2 and 4 ranks): the votes travel on the world's host channel, so a
// signal or a spent budget on one rank stops every rank after the same step.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <thread>

#include "tests/parallel/mpi_test_main.h"
#include "trainer/preemption.h"
#include "trainer/stop_request.h"

namespace lattice {
namespace {

using testing::world;

TEST_CASE("one rank's spent budget, then one rank's signal, stops every rank") {
  Communicator& w = world();
  const bool last = w.rank() == w.size() - 1;
  TrainingConfig t;
  t.exit_duration_mins = last ? 1e-6 : 1e6;  // only the last rank's budget runs out
  {
    StopRequest budget(t, &w);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK(budget.poll(1).reason == StopReason::kDuration);
  }
  t.exit_duration_mins = 0;
  // The signal flag is process-wide and sticky: raised last, on rank 0 only.
  install_preemption_handlers();
  StopRequest signalled(t, &w);
  CHECK_FALSE(signalled.poll(1));
  if (w.rank() == 0) std::raise(SIGTERM);
  const StopDecision d = signalled.poll(2);
  CHECK(d.reason == StopReason::kSignal);
  CHECK(d.signal == SIGTERM);
}

}  // namespace
}  // namespace lattice
