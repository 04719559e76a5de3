// CommHandle::wait_on on a device transport, as NCCL's operations behave: a fake operation on the
// CUDA stand-in whose completion is a device event (FakeEvents). The stream waits for that event on
// the device and the host does not; the watchdog keeps the operation and its tensors until it
// completes; its host wait for them (before the step's read-back) is under the timeout, so a hang
// the host never waited for still ends with the watchdog's report and the operation's abort().
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "kernels/error.h"
#include "parallel/communicator.h"
#include "tests/kernels/fake_events.h"

namespace lattice {
namespace {

using test::FakeEvents;

std::vector<int> compute_waits;  // the events the compute stream was told to wait for
void record_compute_wait(void* event) { compute_waits.push_back(FakeEvents::id(event)); }

Backend device_backend() {
  Backend b = FakeEvents::device();
  b.compute_wait = &record_compute_wait;
  compute_waits.clear();
  return b;
}

// Completes when its device event has (as cudaEventQuery on NCCL's stream would say), or after
// `complete_after_tests` polls when that is >= 0. Holds `tensors` (a token here) until it completes.
class DeviceOp : public PendingOp {
 public:
  DeviceOp(std::shared_ptr<void> event, std::shared_ptr<int> tensors, int complete_after_tests = -1)
      : event_(std::move(event)), tensors_(std::move(tensors)), complete_after_(complete_after_tests) {}

  bool test() override {
    ++tests;
    if (FakeEvents::query(event_.get()) || (complete_after_ >= 0 && tests > complete_after_)) tensors_.reset();
    return tensors_ == nullptr;
  }
  OpDescription describe() const override {
    return {1, "group 'dp' (world ranks [0, 1])", "all_reduce(sum) of f32[4]"};
  }
  Event device_completion() const override { return Event::adopt(Device::kCuda, event_); }
  void abort() noexcept override { ++*aborts; }

  int tests = 0;
  std::shared_ptr<int> aborts = std::make_shared<int>(0);

 private:
  std::shared_ptr<void> event_;
  std::shared_ptr<int> tensors_;
  int complete_after_;
};

struct Hang {
  std::vector<std::string> reports;
  Watchdog::Action action() {
    return [this](const HangReport& r) { reports.push_back(r.message); };
  }
};

TEST_CASE("a stream wait on a device operation orders the stream on the device; the host does not wait") {
  const Backend backend = device_backend();
  test::ScopedBackend registered(Device::kCuda, &backend);
  const Stream compute(Device::kCuda);
  auto watchdog = std::make_shared<Watchdog>(10.0);
  auto tensors = std::make_shared<int>(0);
  const std::weak_ptr<int> alive = tensors;
  std::shared_ptr<void> done = FakeEvents::record();  // the operation's completion on its own stream
  {
    CommHandle h(std::make_unique<DeviceOp>(done, std::move(tensors)), watchdog, compute);
    CHECK(h.pending());
    h.wait_on(compute);
    CHECK(compute_waits == std::vector<int>{FakeEvents::id(done.get())});
    CHECK(FakeEvents::waited.empty());  // no host wait for any event
    CHECK_FALSE(h.pending());
    REQUIRE(h.completed().recorded());
    CHECK(h.completed().device() == Device::kCuda);
    CHECK_FALSE(h.completed().query());  // the device's completion point, not the host's observation
    h.wait();                             // nothing left for this handle
    CHECK(h.test());
  }
  // The handle is gone without a host wait: the watchdog holds the operation and what it uses.
  CHECK(FakeEvents::waited.empty());
  CHECK(watchdog->in_flight() == 1);
  CHECK_FALSE(alive.expired());

  // It completes on the device; the next operation kept drops it (test(), no waiting).
  FakeEvents::completed = FakeEvents::id(done.get());
  std::shared_ptr<void> second = FakeEvents::record();
  CommHandle h2(std::make_unique<DeviceOp>(second, std::make_shared<int>(1)), watchdog, compute);
  h2.wait_on(compute);
  CHECK(alive.expired());
  CHECK(watchdog->in_flight() == 1);
  CHECK(compute_waits.size() == 2);

  // The read-back's host wait: everything in flight completes under the watchdog.
  FakeEvents::completed = FakeEvents::id(second.get());
  watchdog->wait_in_flight();
  CHECK(watchdog->in_flight() == 0);
  CHECK(FakeEvents::waited.empty());
}

TEST_CASE("a device operation nobody waited for on the host still hangs into the watchdog's report") {
  const Backend backend = device_backend();
  test::ScopedBackend registered(Device::kCuda, &backend);
  const Stream compute(Device::kCuda);
  Hang hang;
  auto watchdog = std::make_shared<Watchdog>(0.05, hang.action());
  auto op = std::make_unique<DeviceOp>(FakeEvents::record(), std::make_shared<int>(0));  // never completes
  const std::shared_ptr<int> aborts = op->aborts;
  CommHandle(std::move(op), watchdog, compute).wait_on(compute);
  CHECK(watchdog->in_flight() == 1);
  try {
    watchdog->wait_in_flight();
    FAIL("the wait for in-flight operations returned");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kHungCollective);
  }
  CHECK(*aborts == 1);  // NCCL: the communicator is aborted before the hang action
  REQUIRE(hang.reports.size() == 1);
  CHECK_THAT(hang.reports[0], Catch::Contains("rank 1: all_reduce(sum) of f32[4] on group 'dp' (world ranks [0, 1])") &&
                                  Catch::Contains("parallel.timeout_s = 0.05"));
  CHECK(watchdog->in_flight() == 0);  // handed over (and leaked, as a timed-out CommHandle wait does)
}

TEST_CASE("a host stream, or a host-driven operation, makes wait_on a host wait as before") {
  const Backend backend = device_backend();
  test::ScopedBackend registered(Device::kCuda, &backend);
  auto watchdog = std::make_shared<Watchdog>(10.0);

  // A CPU stream cannot wait on the device: the host completes the operation.
  auto tensors = std::make_shared<int>(0);
  const std::weak_ptr<int> alive = tensors;
  CommHandle a(std::make_unique<DeviceOp>(FakeEvents::record(), std::move(tensors), 3), watchdog, Stream());
  a.wait_on(Stream());
  CHECK(alive.expired());  // polled to completion by the host (its device event never completed)
  CHECK_FALSE(a.pending());
  CHECK(watchdog->in_flight() == 0);
  CHECK(compute_waits.empty());

  // An operation without a device completion event (MPI) on a device stream: the host completes it.
  class HostOp : public PendingOp {
   public:
    bool test() override { return ++tests > 2; }
    OpDescription describe() const override { return {0, "group 'tp'", "barrier"}; }
    int tests = 0;
  };
  auto host_op = std::make_unique<HostOp>();
  HostOp* raw = host_op.get();
  CommHandle b(std::move(host_op), watchdog, Stream());  // MpiCommunicator's handles are on a CPU stream
  CHECK(raw->tests == 0);
  b.wait_on(Stream(Device::kCuda));  // completes it (the op is deleted once it has)
  CHECK_FALSE(b.pending());
  CHECK(watchdog->in_flight() == 0);
  CHECK(compute_waits.empty());
}

TEST_CASE("the watchdog waits for what is still in flight when it goes away") {
  const Backend backend = device_backend();
  test::ScopedBackend registered(Device::kCuda, &backend);
  const Stream compute(Device::kCuda);
  auto tensors = std::make_shared<int>(0);
  const std::weak_ptr<int> alive = tensors;
  {
    auto watchdog = std::make_shared<Watchdog>(10.0);
    CommHandle(std::make_unique<DeviceOp>(FakeEvents::record(), std::move(tensors), 5), watchdog, compute)
        .wait_on(compute);
    CHECK(watchdog->in_flight() == 1);
    CHECK_FALSE(alive.expired());
  }
  CHECK(alive.expired());  // completed (polled to the end) before the watchdog was destroyed
}

}  // namespace
}  // namespace lattice
