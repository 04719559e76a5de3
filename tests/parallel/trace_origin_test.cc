// Tracer::align_origin_after_barrier (one process, no MPI): the barrier is polled until it says done,
// the origin moves to that instant, and what was recorded before — events, a scope still open, an
// anchor, a pending span — keeps its real place on the new timeline; otherData says how the origin
// was taken.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kernels/stream.h"
#include "parallel/trace.h"

using namespace lattice;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : fs::temp_directory_path().string()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

json event_named(const json& trace, const std::string& name) {
  for (const json& e : trace["traceEvents"])
    if (e.value("name", "") == name) return e;
  FAIL("no event " << name);
  return {};
}

}  // namespace

TEST_CASE("a tracer's origin is its creation unless aligned") {
  const fs::path dir = temp_dir("trace_origin_created");
  Tracer t((dir / "t.json").string(), 3);
  t.instant("x", "compute");
  t.flush();
  const json other = read_json(dir / "t.rank3.json")["otherData"];
  CHECK(other["time_origin"] == "created");
  CHECK_FALSE(other.contains("time_origin_ranks"));
  CHECK(other["steady_clock_origin_us"].get<double>() > 0);
}

TEST_CASE("aligning at a barrier's exit re-bases what was recorded before it") {
  using Clock = std::chrono::steady_clock;
  const fs::path dir = temp_dir("trace_origin_aligned");
  Tracer t((dir / "t.json").string(), 1);
  const Stream stream;
  t.instant("before", "compute");
  TraceScope open = t.scope("open across", "compute");
  const TraceAnchor anchor = t.anchor(stream);
  const Event start = stream.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The barrier completes on the third poll, 5 ms after the first: the origin is then, not at the call.
  int polls = 0;
  Clock::time_point first_poll, done_at;
  t.align_origin_after_barrier(2, [&] {
    if (polls++ == 0) first_poll = Clock::now();
    if (polls < 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return false;
    }
    done_at = Clock::now();
    return true;
  });
  const Clock::time_point after_align = Clock::now();
  CHECK(polls == 3);
  t.instant("after", "compute");
  const Event end = stream.record();
  t.span("span across", "compute", anchor, start, end);
  open.end();
  t.flush();

  const json trace = read_json(dir / "t.rank1.json");
  const json other = trace["otherData"];
  CHECK(other["time_origin"] == "barrier");
  CHECK(other["time_origin_ranks"] == 2);
  const double origin_us = other["steady_clock_origin_us"].get<double>();
  const auto steady_us = [](Clock::time_point p) {
    return std::chrono::duration<double, std::micro>(p.time_since_epoch()).count();
  };
  CHECK(origin_us >= steady_us(done_at));
  CHECK(origin_us <= steady_us(after_align));
  CHECK(origin_us >= steady_us(first_poll) + 10000);

  // Before the origin: negative, by at least the sleeps (20 ms, then 10 ms of polls).
  const double before = event_named(trace, "before")["ts"].get<double>();
  CHECK(before <= -30000);
  CHECK(before > -10'000'000);
  const double after = event_named(trace, "after")["ts"].get<double>();
  CHECK(after >= 0);
  CHECK(after < 1'000'000);
  // The scope and the span opened before the alignment and closed after it: they start where they
  // started (with "before", ahead of the origin) and cover the alignment.
  for (const char* name : {"open across", "span across"}) {
    INFO(name);
    const json e = event_named(trace, name);
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    CHECK(ts >= before);
    CHECK(ts - before < 5000);
    CHECK(ts + dur >= after - 1);
  }
}
