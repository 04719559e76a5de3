// OpProfile: which op calls it times (every op of ops.h; the outermost of nested ops; this thread's
// ops on the profiled device; not an op that throws) and the device time it reads from their events,
// on the CUDA stand-in with fake events: from event i to event j is (j - i) ms.
#include <thread>

#include <catch2/catch.hpp>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/fake_events.h"

using namespace lattice;
using lattice::test::FakeEvents;
using lattice::test::ScopedBackend;

namespace {

Tensor on_device(const DeviceContext& device, const Shape& shape) {
  Tensor host = Tensor::zeros(shape);
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = 0.25f * static_cast<float>(i % 7);
  return device.to_device(host);
}

}  // namespace

TEST_CASE("every op of kernels/ops.h is timed") {
  const Backend device = FakeEvents::device();
  ScopedBackend registered(Device::kCuda, &device);
  OpProfile::start(Device::kCuda);
  const auto mismatches = test::compare_backend_ops(Device::kCuda, /*exact=*/true);
  const std::vector<OpTime> rows = OpProfile::stop();
  REQUIRE(mismatches.empty());
  std::set<std::string> timed;
  for (const OpTime& r : rows) timed.insert(r.op);
  for (const std::string& op : test::declared_op_names()) {
    INFO(op);
    CHECK(timed.count(op) == 1);
  }
}

TEST_CASE("a profile counts calls by op and operands and sums their device time") {
  const Backend device = FakeEvents::device();
  ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext ctx(Device::kCuda);
  const Tensor a = on_device(ctx, {4, 5}), b = on_device(ctx, {4, 5}), w = on_device(ctx, {3, 5});
  Tensor out = ctx.empty({4, 5}), wide = ctx.empty({2, 5}), q = ctx.empty({4, 3}), k = ctx.empty({4, 3});
  Tensor host_a = Tensor::zeros({4, 5}), host_out = Tensor::zeros({4, 5});
  REQUIRE(device.gemm_batched == nullptr);  // matmul_group runs a matmul per product, inside itself

  OpProfile::start(Device::kCuda);
  CHECK(OpProfile::running());
  const int first = FakeEvents::recorded;
  for (int i = 0; i < 3; ++i) ops::add(a, b, out);
  const Tensor ws[] = {w, w};
  Tensor ys[] = {q, k};
  ops::matmul_group({&a, 1}, false, ws, true, {}, ys);
  ops::add(host_a, host_a, host_out);                     // host tensors: not the device's time
  std::thread([&] { ops::add(a, b, out); }).join();      // another thread's op: not timed
  CHECK_THROWS_AS(ops::add(a, b, wide), Error);          // throws in its checks: not timed
  const std::vector<OpTime> rows = OpProfile::stop();
  CHECK_FALSE(OpProfile::running());

  // Each timed call is one start and one end event (the ops themselves record none here), and the
  // call that threw recorded its start.
  CHECK(FakeEvents::recorded - first == 2 * 4 + 1);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].op == "add");  // the most time first
  CHECK(rows[0].operands == "f32[4,5] f32[4,5] f32[4,5]");
  CHECK(rows[0].calls == 3);
  CHECK(rows[0].seconds == Approx(3e-3));
  CHECK(rows[0].bytes == 3 * 4 * 5 * 4);  // three f32[4,5]
  CHECK(rows[0].flops == 0);
  CHECK(rows[1].op == "matmul_group");
  CHECK(rows[1].operands == "2x f32[4,5] f32[3,5] f32[4,3]");
  CHECK(rows[1].calls == 1);
  CHECK(rows[1].seconds == Approx(1e-3));
  CHECK(rows[1].bytes == 2 * (20 + 15 + 12) * 4);    // each product's a, b and c
  CHECK(rows[1].flops == 2 * (2.0 * 4 * 3 * 5));     // two [4, 5] x [5, 3] products

  // Stopped: nothing is timed, and stop without a profile running is an error.
  const int after = FakeEvents::recorded;
  ops::add(a, b, out);
  CHECK(FakeEvents::recorded == after);
  CHECK_THROWS_WITH(OpProfile::stop(), Catch::Contains("no profile is running"));
  // A new profile starts empty.
  OpProfile::start(Device::kCuda);
  ops::add(a, b, out);
  const std::vector<OpTime> again = OpProfile::stop();
  REQUIRE(again.size() == 1);
  CHECK(again[0].calls == 1);
}

TEST_CASE("a profile runs once at a time and stops on the thread that started it") {
  OpProfile::start(Device::kCpu);
  CHECK_THROWS_WITH(OpProfile::start(Device::kCpu), Catch::Contains("already running"));
  std::thread([] { CHECK_THROWS_WITH(OpProfile::stop(), Catch::Contains("no profile is running on this thread")); })
      .join();
  CHECK(OpProfile::stop().empty());
}
