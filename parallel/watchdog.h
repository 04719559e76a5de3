// Watchdog: every wait on a communication handle is bounded by a timeout (parallel.timeout_s).
// A collective that does not complete ends the whole job with one message and exit code 3.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/stream.h"
#include "parallel/hang_census.h"

namespace lattice {

// A watchdog-ended job exits with 3 (see ExitCode in kernels/error.h).
inline constexpr int kHungCollectiveExitCode = static_cast<int>(ExitCode::kHungCollective);
inline constexpr double kDefaultCommTimeoutS = 600.0;
// A gap this long between two polls of a wait means the process was not running (suspended): the
// wait leaves it out of its timeout.
inline constexpr std::chrono::seconds kSuspendedGap{1};
// How often a wait answers the census's queries (parallel/hang_census.h).
inline constexpr std::chrono::milliseconds kCensusAnswerInterval{100};

// What a pending operation says about itself when it hangs.
struct OpDescription {
  int world_rank = -1;    // this process in MPI_COMM_WORLD
  std::string group;      // "group 'tp' (world ranks [0, 1]; pp 0, dp 0)"
  std::string operation;  // "all_reduce(sum) of f32[1024] (4 KiB)"
  // The world ranks the operation waits for: its group's other ranks, or a send's or receive's peer.
  // A hang asks them what they are waiting in (parallel/hang_census.h).
  std::vector<int> peers;
};

// The one line a hang is reported with: the rank, the operation, the group, the timeout, what the
// likely cause is and what to do.
std::string hang_message(const OpDescription& op, double timeout_s, double waited_s);

// The backend half of a CommHandle: one outstanding operation.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  // Makes progress; true once the operation has completed (and stays true).
  virtual bool test() = 0;
  virtual OpDescription describe() const = 0;
  // Where the operation completes on a device stream (a device transport: NCCL's stream), so that
  // another stream of that device can be ordered after it without the host waiting. Not recorded
  // (the default) for a host-driven operation (MPI), which the host must complete itself.
  virtual Event device_completion() const { return Event(); }
  // Called once by the watchdog when a wait on the operation times out under an injected hang action
  // (tests), before it: a transport that can cancel its communicator does so (NCCL's ncclCommAbort),
  // so that the process can go on. The default action ends the job first instead (MPI_Abort), as
  // NCCL's abort may itself wait for kernels that a hang elsewhere keeps from starting (NVIDIA/nccl
  // #564). MPI has nothing to cancel.
  virtual void abort() noexcept {}
};

struct HangReport {
  OpDescription op;
  double waited_s = 0;
  double timeout_s = 0;
  std::string message;  // the one line that is logged
};

class Watchdog {
 public:
  // Called once when a wait times out. The default logs report.message at critical level and
  // calls MPI_Abort(MPI_COMM_WORLD, kHungCollectiveExitCode), which ends every rank of the job.
  // An injected action (tests) may return: wait() then throws lattice::Error with the message.
  using Action = std::function<void(const HangReport&)>;

  // timeout_s <= 0 disables the timeout (waits forever).
  explicit Watchdog(double timeout_s = kDefaultCommTimeoutS, Action on_hang = {});
  ~Watchdog();  // waits for the operations still in flight (keep_in_flight)
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_.load(std::memory_order_relaxed); }
  void set_timeout_s(double timeout_s) { timeout_s_.store(timeout_s, std::memory_order_relaxed); }
  void set_action(Action on_hang);
  // With a census (set once, before any wait), waits answer other ranks' census queries, and a hang
  // under the default action asks the operation's peers before it ends the job.
  void set_census(std::shared_ptr<HangCensus> census) { census_ = std::move(census); }

  // Polls op.test() (yielding, then sleeping with a backoff up to 0.5 ms; every 0.1 s answering the
  // census's queries) until it completes or the timeout passes; time this process was not running
  // (a gap of more than kSuspendedGap between two polls: the job suspended) is not counted. Safe to
  // call from several threads at once.
  void wait(PendingOp& op) const;

  // Device-ordered operations (CommHandle::wait_on on a device transport): a stream waits for them
  // on the device and no host has waited. They are kept here, with the tensors they use, until they
  // complete: keep_in_flight drops those that have completed (test(), no waiting) and adds `op`;
  // wait_in_flight is the host wait for all of them under the timeout, so that a hang in
  // communication the host never waited for still ends the job with the watchdog's message — call
  // it before a host wait on the device (the step's read-back), which would otherwise block
  // without a timeout. Thread-safe. The destructor waits for what is left.
  void keep_in_flight(std::unique_ptr<PendingOp> op) const;
  void wait_in_flight() const;
  size_t in_flight() const;

  static void default_action(const HangReport& report);

 private:
  std::atomic<double> timeout_s_;
  Action on_hang_;
  std::shared_ptr<HangCensus> census_;
  mutable std::mutex in_flight_mutex_;
  mutable std::vector<std::unique_ptr<PendingOp>> in_flight_;
};

// "4 KiB", "1.5 MiB": sizes in hang messages.
std::string format_bytes(double bytes);

}  // namespace lattice
