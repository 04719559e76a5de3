// StopRequest: whether training stops after the current step — a preemption signal on any rank
// (SIGTERM / SIGUSR1 / SIGINT), the job's wall-clock budget (training.exit_duration_mins) spent on any rank,
// or a step that is a multiple of training.exit_interval — decided identically on every rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "parallel/communicator.h"
#include "trainer/config.h"

namespace lattice {

enum class StopReason { kNone, kSignal, kDuration, kExitInterval };

struct StopDecision {
  StopReason reason = StopReason::kNone;
  int signal = 0;  // kSignal: the largest signal number any rank received (SIGTERM > SIGUSR1 > SIGINT)
  explicit operator bool() const { return reason != StopReason::kNone; }
  // "SIGTERM", "training.exit_duration_mins (90 min)", "training.exit_interval (100)"
  std::string describe(const TrainingConfig& training) const;
};

class StopRequest {
 public:
  // The wall clock starts now. `world` = every rank of the job (nullptr or a one-process group: no
  // communication).
  StopRequest(const TrainingConfig& training, Communicator* world);

  // Call at the end of every step, on every rank (a collective: one vote per rank on the world's
  // host channel).
  // The signal flag and the budget are read locally and agreed over the world, so all ranks stop
  // after the same step even when only one of them was signalled.
  StopDecision poll(int64_t step);

 private:
  TrainingConfig training_;
  Communicator* world_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lattice
