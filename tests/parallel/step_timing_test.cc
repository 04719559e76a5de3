// Timing a step adds no host synchronization: the pipeline executor's and the gradient buckets'
// device intervals are kept as events and read after the step (PipelineStepTiming::stats(),
// GradBuckets::last_stats()). On a GPU reading an event's time waits for it, so one read inside the
// step would make the host wait for the device's queue. Checked with fake device events whose times
// may only be read once they are complete, and that complete only when the test says so (as the
// step's read-back would).
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/device_context.h"
#include "kernels/device_time_sum.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_executor.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;

namespace {

// Event i is the i-th recorded; complete once g_completed reaches it; i to j lasts (j - i) ms.
int g_recorded = 0, g_completed = 0, g_early_reads = 0;
std::shared_ptr<void> fake_record() { return std::make_shared<int>(++g_recorded); }
bool fake_query(void* e) { return *static_cast<int*>(e) <= g_completed; }
void fake_synchronize(void* e) {
  if (!fake_query(e)) ++g_early_reads;  // a host wait inside the step
}
double fake_seconds(void* start, void* end) {
  if (!fake_query(start) || !fake_query(end)) ++g_early_reads;
  return (*static_cast<int*>(end) - *static_cast<int*>(start)) * 1e-3;
}

Backend fake_event_device() {
  Backend b = test::cuda_stand_in();
  b.record_event = &fake_record;
  b.event_query = &fake_query;
  b.event_synchronize = &fake_synchronize;
  b.event_seconds = &fake_seconds;
  return b;
}

// A stage whose work is a fixed number of recorded events (standing for kernels) on the stream.
class EventStage : public PipelineStage {
 public:
  explicit EventStage(const DeviceContext& ctx) : ctx_(ctx) {}
  Shape activation_shape() const override { return {4}; }
  DType activation_dtype() const override { return DType::kF32; }
  void forward(int, const Tensor&, Tensor&) override { (void)ctx_.stream().record(); }
  void backward(int, const Tensor&, Tensor&) override {
    (void)ctx_.stream().record();
    (void)ctx_.stream().record();
  }

 private:
  const DeviceContext& ctx_;
};

}  // namespace

TEST_CASE("DeviceTimeSum reads its events only when asked") {
  const Backend device = fake_event_device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const Stream stream(Device::kCuda);
  g_recorded = g_completed = g_early_reads = 0;
  DeviceTimeSum sum;
  CHECK(sum.seconds() == 0);
  for (int i = 0; i < 3; ++i) {
    const Event start = stream.record();
    (void)stream.record();
    sum.add(start, stream.record());  // 2 ms each
  }
  CHECK(g_early_reads == 0);
  g_completed = g_recorded;
  CHECK(sum.seconds() == Approx(6e-3));
  CHECK(g_early_reads == 0);
}

TEST_CASE("a pipeline step reads no event: its times come from stats() after the step") {
  const Backend device = fake_event_device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext ctx(Device::kCuda);
  LocalCommunicator pp("pp");
  Tracer tracer("", 0);
  PipelineExecutor executor(pp, tracer, ctx);
  EventStage a(ctx), b(ctx);
  const int m = 4;
  const std::vector<Action> actions = make_schedule(ScheduleKind::kInterleaved, 1, 2, m, 0);
  g_recorded = g_completed = g_early_reads = 0;
  const PipelineStepTiming timing = executor.run(actions, {&a, &b});
  CHECK(g_early_reads == 0);  // run() waited for no event
  g_completed = g_recorded;   // the step's read-back: everything has run
  const PipelineStepStats stats = timing.stats();
  CHECK(g_early_reads == 0);
  CHECK(stats.forwards == 2 * m);
  CHECK(stats.backwards == 2 * m);
  // Between the events around each compute: a forward records one event (2 ms), a backward two (3 ms).
  CHECK(stats.forward_s == Approx(2 * m * 2e-3));
  CHECK(stats.backward_s == Approx(2 * m * 3e-3));
  CHECK(stats.step_s >= stats.compute_s());
}
