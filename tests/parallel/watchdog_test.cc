// The watchdog on an operation that never completes: the wait ends after the timeout with the
// report naming the rank, group and operation and exit code 3, and the operation's abort() (how
// NCCL cancels its communicator) runs once, before the hang action.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "parallel/watchdog.h"

using namespace lattice;

namespace {

struct Events {
  std::vector<std::string> order;
};

// Completes on its `done`th test; test number `stall_at` blocks for `stall`, as a process stopped
// mid-wait (SIGSTOP, a suspended job) sees the clock jump between two polls. A stall at a later test
// lands after the wait has started sleeping between polls.
class StallsThenCompletes : public PendingOp {
 public:
  StallsThenCompletes(std::chrono::milliseconds stall, int stall_at, int done)
      : stall_(stall), stall_at_(stall_at), done_(done) {}
  bool test() override {
    if (++tests_ == stall_at_) std::this_thread::sleep_for(stall_);
    return tests_ >= done_;
  }
  OpDescription describe() const override { return {0, "group 'pp' (world ranks [0, 1])", "recv of f32[8]"}; }

 private:
  std::chrono::milliseconds stall_;
  int stall_at_, done_;
  int tests_ = 0;
};

class NeverCompletes : public PendingOp {
 public:
  explicit NeverCompletes(Events& e) : events_(e) {}
  bool test() override { return false; }
  OpDescription describe() const override { return {3, "group 'dp' (world ranks [1, 3])", "all_reduce(sum) of f32[8]"}; }
  void abort() noexcept override { events_.order.push_back("abort"); }

 private:
  Events& events_;
};

}  // namespace

TEST_CASE("a timed-out wait aborts the operation, then runs the hang action, then throws exit 3") {
  Events events;
  std::string message;
  const Watchdog watchdog(0.05, [&](const HangReport& r) {
    events.order.push_back("action");
    message = r.message;
  });
  NeverCompletes op(events);
  const auto start = std::chrono::steady_clock::now();
  try {
    watchdog.wait(op);
    FAIL("the wait returned");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kHungCollective);
  }
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= 0.05);
  CHECK(events.order == std::vector<std::string>{"abort", "action"});
  CHECK_THAT(message, Catch::Contains("rank 3: all_reduce(sum) of f32[8] on group 'dp' (world ranks [1, 3])") &&
                          Catch::Contains("parallel.timeout_s = 0.05"));
}

TEST_CASE("time the process was not running is not a hang: a suspended job resumes") {
  // A 1.5 s stall between two polls, a 1 s timeout: the wait goes on and the operation completes.
  const Watchdog watchdog(1.0, [](const HangReport& r) { FAIL("hang reported: " << r.message); });
  for (int stall_at : {2, 600}) {
    INFO("the stall at test " << stall_at);
    StallsThenCompletes op(std::chrono::milliseconds(1500), stall_at, stall_at + 2);
    CHECK_NOTHROW(watchdog.wait(op));
  }
}
