// Stream and Event on the CPU: inline work, so events are complete once recorded and waits return
// at once; timings come from the host clock; events of another device are refused.
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/stream.h"

using namespace lattice;

TEST_CASE("a CPU event is complete once recorded") {
  const DeviceContext ctx;
  const Stream& s = ctx.stream();
  Event never;
  REQUIRE(!never.recorded());
  REQUIRE(never.query());
  never.synchronize();
  s.wait(never);

  Event e = s.record();
  REQUIRE(e.recorded());
  REQUIRE(e.device() == Device::kCpu);
  REQUIRE(e.query());
  e.synchronize();
  s.wait(e);
  s.synchronize();
  Event copy = e;  // names the same point
  REQUIRE(copy.seconds_since(e) == 0.0);
}

TEST_CASE("seconds_since measures between two recorded events") {
  Stream s;
  Event start = s.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Event end;
  end.record(s);
  const double dt = end.seconds_since(start);
  REQUIRE(dt >= 0.019);
  REQUIRE(dt < 5.0);
  REQUIRE(start.seconds_since(end) == -dt);
  REQUIRE_THROWS_WITH(end.seconds_since(Event()), Catch::Contains("both events must be recorded"));
  REQUIRE_THROWS_WITH(Event().seconds_since(start), Catch::Contains("both events must be recorded"));
}

TEST_CASE("another device's stream is refused in a CPU-only binary") {
  Stream cuda(Device::kCuda);
  REQUIRE(cuda.device() == Device::kCuda);
  REQUIRE_THROWS_WITH(cuda.record(), Catch::Contains("Event::record") && Catch::Contains("cuda"));
  Event e;
  REQUIRE_THROWS_AS(e.record(cuda), Error);
  REQUIRE(!e.recorded());
  cuda.wait(Event());  // a never-recorded event holds nothing back
  // A host event marks finished host work (an MPI operation the host completed): any stream may
  // wait for it.
  cuda.wait(Stream().record());
}
