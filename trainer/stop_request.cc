// The per-step stop agreement: local flags, one tiny all-reduce(max) over the world.
#include "trainer/stop_request.h"

#include <fmt/format.h>

#include "kernels/tensor.h"
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

StopDecision StopRequest::poll(int64_t step) {
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
  Tensor flags = Tensor::empty({2}, DType::kI32);
  flags.i32()[0] = preemption_signal();
  flags.i32()[1] = training_.exit_duration_mins > 0 && minutes >= training_.exit_duration_mins ? 1 : 0;
  if (world_ != nullptr && world_->size() > 1) world_->all_reduce(flags, ReduceOp::kMax);
  StopDecision d;
  if (flags.i32()[0] != 0) {
    d.reason = StopReason::kSignal;
    d.signal = flags.i32()[0];
  } else if (flags.i32()[1] != 0) {
    d.reason = StopReason::kDuration;
  } else if (training_.exit_interval > 0 && step % training_.exit_interval == 0) {
    d.reason = StopReason::kExitInterval;
  }
  return d;
}

}  // namespace lattice
