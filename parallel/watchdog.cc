// Watchdog: the polling wait with a timeout, and the default action that ends the job.
#include "parallel/watchdog.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

std::string hang_message(const OpDescription& op, double timeout_s, double waited_s) {
  return fmt::format(
      "rank {}: {} on {} did not complete within parallel.timeout_s = {:g} s (waited {:.1f} s): a rank of that "
      "group never joined it (it crashed, hangs, or took a different code path). Ending the job with exit code {}; "
      "if this operation is legitimately slower, raise parallel.timeout_s.",
      op.world_rank, op.operation, op.group, timeout_s, waited_s, kHungCollectiveExitCode);
}

namespace {

// How long a timed-out rank waits for its peers' answers (they answer within kCensusAnswerInterval
// when they are waiting, if the machine lets them run; the rest never will): a tenth of the
// timeout, within [2, 10] s.
double census_grace_s(double timeout_s) { return std::clamp(timeout_s / 10, 2.0, 10.0); }

}  // namespace

Watchdog::Watchdog(double timeout_s, Action on_hang)
    : timeout_s_(timeout_s), on_hang_(std::move(on_hang)) {}

Watchdog::~Watchdog() {
  try {
    wait_in_flight();
  } catch (const std::exception& e) {
    spdlog::error("device-ordered communication abandoned at the end: {}", e.what());
  }
}

void Watchdog::set_action(Action on_hang) { on_hang_ = std::move(on_hang); }

void Watchdog::keep_in_flight(std::unique_ptr<PendingOp> op) const {
  std::lock_guard<std::mutex> lock(in_flight_mutex_);
  for (size_t i = 0; i < in_flight_.size();) {  // an index loop: a test() that throws leaves the list whole
    if (in_flight_[i]->test()) {
      in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  if (op != nullptr && !op->test()) in_flight_.push_back(std::move(op));
}

void Watchdog::wait_in_flight() const {
  std::vector<std::unique_ptr<PendingOp>> ops;
  {
    std::lock_guard<std::mutex> lock(in_flight_mutex_);
    ops.swap(in_flight_);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    try {
      wait(*ops[i]);
    } catch (...) {
      // As CommHandle::wait: what is still in flight is leaked, so that nothing writes into freed memory.
      for (size_t j = i; j < ops.size(); ++j) (void)ops[j].release();
      throw;
    }
  }
}

size_t Watchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(in_flight_mutex_);
  return in_flight_.size();
}

void Watchdog::wait(PendingOp& op) const {
  if (op.test()) return;
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto last_poll = start;
  double suspended_s = 0;
  int polls = 0;
  int sleep_us = 1;
  auto next_answer = start + kCensusAnswerInterval;
  while (!op.test()) {
    // MPI progresses only inside MPI calls: poll; yield first (latency), then back off so that
    // oversubscribed ranks leave the cores to each other.
    if (++polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      sleep_us = std::min(sleep_us * 2, 500);
    }
    // A gap between two polls far longer than the sleep above (taken from the previous poll, so the
    // test and the sleep are both inside it) means this process was not running: the job suspended
    // by Slurm's scontrol suspend or gang scheduling, a paused VM, a debugger. That time is nobody's
    // hang, and a job suspended as a whole would otherwise end with exit 3 the moment it resumed: it
    // is left out of the wait.
    const auto now = Clock::now();
    const auto gap = now - last_poll;
    last_poll = now;
    if (gap > kSuspendedGap) {
      start += gap;
      suspended_s += std::chrono::duration<double>(gap).count();
    }
    if (census_ != nullptr && now >= next_answer) {
      census_->answer(op.describe());
      next_answer = now + kCensusAnswerInterval;
    }
    double timeout = timeout_s();
    if (timeout <= 0) continue;
    double waited = std::chrono::duration<double>(now - start).count();
    if (waited < timeout) continue;
    if (op.test()) break;  // completed while this rank was away: no hang

    HangReport report;
    report.op = op.describe();
    report.waited_s = waited;
    report.timeout_s = timeout;
    report.message = hang_message(report.op, timeout, waited);
    if (suspended_s > 0)
      report.message += fmt::format(" (Besides, this rank was not running for {:.1f} s, suspended, which is not counted.)",
                                    suspended_s);
    if (!on_hang_ && census_ != nullptr) report.message += census_->ask(report.op, census_grace_s(timeout));
    // The default action ends the job before anything is cancelled: NCCL's abort waits for the
    // communicator's queued kernels, which a hang elsewhere (another communicator the compute stream
    // waits for) can keep from ever starting. Process death frees the GPU.
    if (!on_hang_) default_action(report);
    op.abort();
    on_hang_(report);
    throw Error(report.message, static_cast<ExitCode>(kHungCollectiveExitCode));
  }
}

void Watchdog::default_action(const HangReport& report) {
  spdlog::critical("{}", report.message);
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, kHungCollectiveExitCode);
  std::_Exit(kHungCollectiveExitCode);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:g} B", bytes);
  return fmt::format("{:.4g} {}", bytes, units[u]);
}

}  // namespace lattice
