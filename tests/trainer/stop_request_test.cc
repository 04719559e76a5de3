// StopRequest in one process: training.exit_interval stops on its multiples, an exhausted
// exit_duration_mins stops at the next poll, and a SIGUSR1 / SIGTERM (which only set a flag) stops
// with the signal's name. The signal flag is process-wide and sticky, so it is raised last.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <thread>

#include "parallel/local_communicator.h"
#include "trainer/preemption.h"
#include "trainer/stop_request.h"

namespace lattice {
namespace {

TEST_CASE("stop requests: exit_interval, exit_duration_mins, then a signal") {
  LocalCommunicator world("world");
  TrainingConfig t;
  {
    StopRequest none(t, &world);
    for (int64_t step = 1; step <= 20; ++step) CHECK_FALSE(none.poll(step));
  }
  t.exit_interval = 5;
  {
    StopRequest every5(t, nullptr);  // no communicator at all: one process
    CHECK_FALSE(every5.poll(4));
    const StopDecision d = every5.poll(10);
    CHECK(d.reason == StopReason::kExitInterval);
    CHECK(d.describe(t) == "training.exit_interval (5)");
  }
  t.exit_interval = 0;
  t.exit_duration_mins = 1e-6;  // 60 µs
  {
    StopRequest budget(t, &world);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const StopDecision d = budget.poll(1);
    CHECK(d.reason == StopReason::kDuration);
    CHECK(d.describe(t) == "training.exit_duration_mins (1e-06 min)");
  }
  t.exit_duration_mins = 0;
  install_preemption_handlers();
  StopRequest signalled(t, &world);
  CHECK_FALSE(signalled.poll(1));
  std::raise(SIGUSR1);  // the handler sets the flag; the process goes on
  std::raise(SIGTERM);  // the first signal wins; a second one changes nothing
  const StopDecision d = signalled.poll(2);
  CHECK(d.reason == StopReason::kSignal);
  CHECK(d.signal == SIGUSR1);
  CHECK(d.describe(t) == "SIGUSR1");
}

}  // namespace
}  // namespace lattice
