// Timing a step adds no host synchronization: the pipeline executor's and the gradient buckets'
// device intervals are kept as events and read after the step (PipelineStepTiming::stats(),
// GradBuckets::last_stats()). On a GPU reading an event's time waits for it, so one read inside the
// step would make the host wait for the device's queue. Checked with fake device events whose times
// may only be read once they are complete, and that complete only when the test says so (as the
// step's read-back would). And a traced step's spans nest in the step by device time.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kernels/device_context.h"
#include "kernels/device_time_sum.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_executor.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"
#include "tests/kernels/backend_harness.h"
#include "tests/input_error_testing.h"
#include "tests/kernels/fake_events.h"

using namespace lattice;

namespace {

using test::FakeEvents;

// No host wait and no read of an event in flight so far.
bool nothing_waited() { return FakeEvents::waited.empty() && FakeEvents::early_reads == 0; }

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
  const Backend device = FakeEvents::device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const Stream stream(Device::kCuda);
  DeviceTimeSum sum;
  CHECK(sum.seconds() == 0);
  for (int i = 0; i < 3; ++i) {
    const Event start = stream.record();
    (void)stream.record();
    sum.add(start, stream.record());  // 2 ms each
  }
  CHECK(nothing_waited());
  FakeEvents::completed = FakeEvents::recorded;
  CHECK(sum.seconds() == Approx(6e-3));
  CHECK(nothing_waited());
}

TEST_CASE("a pipeline step reads no event: its times come from stats() after the step") {
  const Backend device = FakeEvents::device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext ctx(Device::kCuda);
  LocalCommunicator pp("pp");
  Tracer tracer("", 0);
  PipelineExecutor executor(pp, tracer, ctx);
  EventStage a(ctx), b(ctx);
  const int m = 4;
  const std::vector<Action> actions = make_schedule(ScheduleKind::kInterleaved, 1, 2, m, 0);
  const PipelineStepTiming timing = executor.run(actions, {&a, &b});
  CHECK(nothing_waited());                           // run() waited for no event
  FakeEvents::completed = FakeEvents::recorded;      // the step's read-back: everything has run
  const PipelineStepStats stats = timing.stats();
  CHECK(nothing_waited());
  CHECK(stats.forwards == 2 * m);
  CHECK(stats.backwards == 2 * m);
  // Between the events around each compute: a forward records one event (2 ms), a backward two (3 ms).
  CHECK(stats.forward_s == Approx(2 * m * 2e-3));
  CHECK(stats.backward_s == Approx(2 * m * 3e-3));
  CHECK(stats.step_s >= stats.compute_s());
}

TEST_CASE("a traced step's forwards and backwards nest in its step span, however far the host runs ahead") {
  // On a GPU the host enqueues ahead of the device, so a span is placed from an anchor's host time
  // plus device time since the anchor's event. Here the host spends 200 ms between the step's
  // anchor and the pipeline while the device advances 1 ms (one fake event): the pipeline's spans
  // must still lie inside the step, which they do when both are placed from the step's anchor.
  const Backend device = FakeEvents::device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const std::string path = testing::temp_path("step.json");
  const DeviceContext ctx(Device::kCuda);
  LocalCommunicator pp("pp");
  Tracer tracer(path, 0);
  PipelineExecutor executor(pp, tracer, ctx);
  EventStage a(ctx), b(ctx);
  const TraceAnchor anchor = tracer.anchor(ctx.stream());
  const Event step_start = ctx.stream().record();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  executor.set_trace_step(1, anchor);
  (void)executor.run(make_schedule(ScheduleKind::kInterleaved, 1, 2, 4, 0), {&a, &b});
  const Event step_end = ctx.stream().record();
  tracer.span("step 1", "compute", anchor, step_start, step_end);
  FakeEvents::completed = FakeEvents::recorded;
  tracer.flush();

  std::ifstream in(Tracer::trace_path_for_rank(path, 0));
  const nlohmann::json trace = nlohmann::json::parse(in);
  double step_begin = -1, step_finish = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == "step 1") {
      step_begin = e["ts"].get<double>();
      step_finish = step_begin + e["dur"].get<double>();
    }
  }
  REQUIRE(step_finish > step_begin);
  int computes = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name != "forward" && name != "backward") continue;
    ++computes;
    INFO(e.dump());
    CHECK(e["ts"].get<double>() >= step_begin);
    CHECK(e["ts"].get<double>() + e["dur"].get<double>() <= step_finish + 1e-3);
  }
  CHECK(computes == 16);  // 2 chunks x 4 micro-batches, forward and backward
}
