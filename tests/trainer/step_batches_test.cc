// StepBatches on a device: the source fills pinned host buffers, allocated once; each micro-batch is
// copied by an enqueued copy from pinned memory (never the synchronous staged copy_from_host, which
// on a GPU waits for the whole compute stream and would stall the host once per micro-batch); and a
// buffer is refilled only after the event recorded behind its last copies has been waited for.
// Checked on the CUDA stand-in (host memory posing as a device) with counting entries and fake events.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/fake_events.h"
#include "trainer/step_batches.h"

using namespace lattice;

namespace {

using test::FakeEvents;

int pinned_allocations = 0, pinned_copies = 0, staged_copies = 0;

std::shared_ptr<Storage> counted_allocate_pinned(size_t bytes) {
  ++pinned_allocations;
  return Storage::host(bytes);
}
void counted_copy_from_pinned(const void* src, void* dst, int64_t bytes) {
  ++pinned_copies;
  test::cuda_stand_in().copy_from_pinned(src, dst, bytes);
}
void counted_copy_from_host(const void* src, void* dst, int64_t bytes) {
  ++staged_copies;
  test::cuda_stand_in().copy_from_host(src, dst, bytes);
}
Backend counting_device() {
  Backend b = FakeEvents::device();
  b.allocate_pinned = &counted_allocate_pinned;
  b.copy_from_pinned = &counted_copy_from_pinned;
  b.copy_from_host = &counted_copy_from_host;
  return b;
}

}  // namespace

TEST_CASE("micro-batches reach the device through pinned buffers and enqueued copies, refilled after their event") {
  const Backend device = counting_device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext ctx(Device::kCuda);
  Tracer tracer("", 0);
  constexpr int kMicro = 3;
  StepBatches batches(kMicro, 2, 5, 100000, ctx, tracer);

  int step = 0;
  std::vector<int> waited_before_fill;  // per fill: the last event waited for (0: none)
  const MicroBatchSource source = [&](int64_t global, int64_t micro, Tensor& ids, Tensor& targets) {
    waited_before_fill.push_back(FakeEvents::waited.empty() ? 0 : FakeEvents::waited.back());
    for (int64_t i = 0; i < ids.numel(); ++i) {
      ids.i32()[i] = static_cast<int32_t>(1000 * global + 100 * micro + i);
      targets.i32()[i] = ids.i32()[i] + 1;
    }
  };
  for (step = 0; step < 2; ++step) {
    pinned_copies = 0;
    batches.begin(source, step, step);
    for (int m = 0; m < kMicro; ++m) {
      const Tensor ids = ctx.to_host(batches.ids(m)), targets = ctx.to_host(batches.targets(m));
      INFO("step " << step << " micro-batch " << m);
      for (int64_t i = 0; i < ids.numel(); ++i) {
        REQUIRE(ids.i32()[i] == 1000 * step + 100 * m + i);
        REQUIRE(targets.i32()[i] == ids.i32()[i] + 1);
      }
      (void)batches.targets(m);  // read once per step: no second fill or copy
    }
    CHECK(pinned_copies == 2 * kMicro);
  }
  CHECK(pinned_allocations == 2 * kMicro);  // ids and targets per micro-batch, in the first step only
  CHECK(staged_copies == 0);
  // One event per micro-batch per step, recorded behind its two copies: 1-3 in step 0, 4-6 in step 1.
  CHECK(FakeEvents::recorded == 2 * kMicro);
  // Step 0 fills fresh buffers (their default events are complete: nothing to wait for); step 1
  // refills micro-batch m only after waiting for event m + 1, the one behind step 0's copies of it.
  REQUIRE(waited_before_fill.size() == 2 * kMicro);
  for (int m = 0; m < kMicro; ++m) {
    CHECK(waited_before_fill[m] == 0);
    CHECK(waited_before_fill[kMicro + m] == m + 1);
  }
}

TEST_CASE("a source's id or target outside the vocabulary is an InputError naming the micro-batch") {
  const DeviceContext ctx(Device::kCpu);
  Tracer tracer("", 0);
  StepBatches batches(2, 1, 4, 50, ctx, tracer);
  for (const bool bad_target : {false, true}) {
    const MicroBatchSource source = [&](int64_t, int64_t micro, Tensor& ids, Tensor& targets) {
      for (int64_t i = 0; i < ids.numel(); ++i) ids.i32()[i] = targets.i32()[i] = 7;
      if (micro == 1) (bad_target ? targets : ids).i32()[3] = bad_target ? -1 : 50;
    };
    batches.begin(source, 9, 9);
    CHECK_NOTHROW(batches.ids(0));
    const std::string want = bad_target ? "micro-batch 1 of global batch 9: target -1 at position 3 is outside [0, 50)"
                                        : "micro-batch 1 of global batch 9: token id 50 at position 3 is outside [0, 50)";
    CHECK_THROWS_AS(batches.ids(1), InputError);
    CHECK_THROWS_WITH(batches.ids(1), Catch::Contains(want) && Catch::Contains("model.vocab_size"));
  }
}
