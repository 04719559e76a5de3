// The per-step stop agreement: local votes, one host all-gather over the world.
#include "trainer/stop_request.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "trainer/preemption.h"

namespace lattice {

std::string StopDecision::describe(const TrainingConfig& training) const {
  switch (reason) {
    case StopReason::kSignal: return preemption_signal_name(signal);
    case StopReason::kDuration: return fmt::format("training.exit_duration_mins ({:g} min)", training.exit_duration_mins);
    case StopReason::kExitInterval: return fmt::format("training.exit_interval ({})", training.exit_interval);
    case StopReason::kNone: break;
  }
  return "nothing";
}

StopRequest::StopRequest(const TrainingConfig& training, Communicator* world)
    : training_(training), world_(world), start_(std::chrono::steady_clock::now()) {}

namespace {

// One rank's vote.
struct StopVote {
  int32_t signal = 0;        // preemption_signal()
  uint8_t budget_spent = 0;  // training.exit_duration_mins reached
};

}  // namespace

StopDecision StopRequest::poll(int64_t step) {
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
  StopVote agreed{preemption_signal(), training_.exit_duration_mins > 0 && minutes >= training_.exit_duration_mins};
  if (world_ != nullptr && world_->size() > 1) {
    for (const StopVote& v : world_->host().all_gather(agreed, "stop vote")) {
      agreed.signal = std::max(agreed.signal, v.signal);
      agreed.budget_spent = std::max(agreed.budget_spent, v.budget_spent);
    }
  }
  StopDecision d;
  if (agreed.signal != 0) {
    d.reason = StopReason::kSignal;
    d.signal = agreed.signal;
  } else if (agreed.budget_spent != 0) {
    d.reason = StopReason::kDuration;
  } else if (training_.exit_interval > 0 && step % training_.exit_interval == 0) {
    d.reason = StopReason::kExitInterval;
  }
  return d;
}

}  // namespace lattice
