// The Chrome-trace Tracer: event fields, disabled = no file, per-rank file names, valid JSON with
// nested scopes inside their parents, concurrent emission, the event cap, the message of a failed write.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "parallel/trace.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/fake_events.h"
#include "tests/log_capture.h"

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
  return json::parse(in);  // throws (fails the test) on invalid JSON
}

std::vector<json> events_named(const json& trace, const std::string& name) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e.value("name", "") == name) out.push_back(e);
  return out;
}

json only_event(const json& trace, const std::string& name) {
  const std::vector<json> found = events_named(trace, name);
  REQUIRE(found.size() == 1);
  return found.front();
}

}  // namespace

TEST_CASE("per-rank trace file names") {
  CHECK(Tracer::trace_path_for_rank("runs/x/trace.json", 0) == "runs/x/trace.rank0.json");
  CHECK(Tracer::trace_path_for_rank("runs/x/trace.json", 12) == "runs/x/trace.rank12.json");
  CHECK(Tracer::trace_path_for_rank("trace", 3) == "trace.rank3");
  CHECK(Tracer::trace_path_for_rank("runs/v1.2/trace", 3) == "runs/v1.2/trace.rank3");
  CHECK(Tracer::trace_path_for_rank("a.b.json", 1) == "a.b.rank1.json");
  CHECK(Tracer::trace_path_for_rank("runs/{rank}/t-{rank}.json", 7) == "runs/7/t-7.json");
  CHECK(Tracer::trace_path_for_rank("t_{rank}", 0) == "t_0");
}

TEST_CASE("a disabled tracer records and writes nothing") {
  const fs::path dir = temp_dir("trace_disabled");
  {
    Tracer t("", 0);
    CHECK_FALSE(t.enabled());
    CHECK(t.path().empty());
    {
      TraceScope s = t.scope("forward", "compute", {{"microbatch", 1}});
    }
    t.instant("x", "compute");
    t.counter("loss", {{"loss", 1.5}});
    t.flush();
    CHECK(t.num_events() == 0);
  }
  CHECK(fs::is_empty(dir));
}

TEST_CASE("events carry name, category, rank, lane, times and args") {
  const fs::path dir = temp_dir("trace_fields");
  const std::string path = (dir / "sub" / "trace.json").string();
  {
    Tracer t(path, 5);
    REQUIRE(t.enabled());
    CHECK(t.path() == (dir / "sub" / "trace.rank5.json").string());
    {
      TraceScope s = t.scope("forward", "compute", {{"microbatch", int64_t{3}}, {"chunk", 1}, {"note", "x"}});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    { TraceScope s = t.scope("all_reduce", "communication", {{"bytes", 1024}}); }
    { TraceScope s = t.scope("data wait", "data"); }
    { TraceScope s = t.scope("optimizer", "optimizer"); }
    { TraceScope s = t.scope("prefetch", "data.prefetch"); }
    t.instant("checkpoint", "compute", {{"step", 2}});
    t.counter("loss", {{"loss", 2.5}});
    CHECK(t.num_events() == 7);
    t.flush();
  }
  CHECK_FALSE(fs::exists(dir / "sub" / "trace.rank5.json.tmp"));
  const json trace = read_json(dir / "sub" / "trace.rank5.json");
  CHECK(trace["displayTimeUnit"] == "ms");
  CHECK(trace["otherData"]["truncated"] == false);

  const auto fwd = events_named(trace, "forward");
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0]["ph"] == "X");
  CHECK(fwd[0]["cat"] == "compute");
  CHECK(fwd[0]["pid"] == 5);
  CHECK(fwd[0]["tid"] == 0);
  CHECK(fwd[0]["ts"].get<double>() >= 0);
  CHECK(fwd[0]["dur"].get<double>() >= 2000);  // slept 2 ms
  CHECK(fwd[0]["args"] == json{{"microbatch", 3}, {"chunk", 1}, {"note", "x"}});

  CHECK(events_named(trace, "all_reduce").at(0)["tid"] == 1);
  CHECK(events_named(trace, "data wait").at(0)["tid"] == 2);
  CHECK(events_named(trace, "optimizer").at(0)["tid"] == 3);
  CHECK(events_named(trace, "prefetch").at(0)["tid"] == 4);
  CHECK(events_named(trace, "checkpoint").at(0)["ph"] == "i");
  const auto loss = events_named(trace, "loss");
  REQUIRE(loss.size() == 1);
  CHECK(loss[0]["ph"] == "C");
  CHECK(loss[0]["args"]["loss"] == 2.5);

  // Metadata names the process after the rank and each lane after its category.
  std::map<int, std::string> lanes;
  for (const json& e : events_named(trace, "thread_name")) lanes[e["tid"]] = e["args"]["name"];
  CHECK(lanes == std::map<int, std::string>{
                     {0, "compute"}, {1, "communication"}, {2, "data"}, {3, "optimizer"}, {4, "data.prefetch"}});
  CHECK(events_named(trace, "process_name").at(0)["args"]["name"] == "rank 5");
}

TEST_CASE("nested scopes lie inside their parent and are written in time order") {
  const fs::path dir = temp_dir("trace_nested");
  Tracer t((dir / "t.json").string(), 0);
  {
    TraceScope step = t.scope("step 1", "compute");
    for (int m = 0; m < 3; ++m) {
      { TraceScope f = t.scope("forward", "compute", {{"microbatch", m}}); }
      { TraceScope b = t.scope("backward", "compute", {{"microbatch", m}}); }
    }
  }
  t.flush();
  const json trace = read_json(dir / "t.rank0.json");
  const auto step = events_named(trace, "step 1");
  REQUIRE(step.size() == 1);
  const double s0 = step[0]["ts"], s1 = s0 + step[0]["dur"].get<double>();
  double prev_ts = -1, prev_end = -1;
  int children = 0;
  bool parent_seen = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], end = ts + e["dur"].get<double>();
    CHECK(ts >= prev_ts);  // sorted by start
    prev_ts = ts;
    if (e["name"] == "step 1") {
      parent_seen = true;
      continue;
    }
    CHECK(parent_seen);  // the parent comes before its children
    CHECK(ts >= s0);
    CHECK(end <= s1 + 1e-3);
    CHECK(ts >= prev_end - 1e-3);  // siblings do not overlap
    prev_end = end;
    ++children;
  }
  CHECK(children == 6);
  CHECK(events_named(trace, "forward").at(2)["args"]["microbatch"] == 2);
}

TEST_CASE("an event-timed span lies where its events were recorded, inside the host scope around it") {
  const fs::path dir = temp_dir("trace_span");
  Tracer t((dir / "t.json").string(), 0);
  const Stream stream;
  {
    TraceScope step = t.scope("step 1", "compute");
    const TraceAnchor anchor = t.anchor(stream);
    const Event start = stream.record();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Event end = stream.record();
    t.span("forward", "compute", anchor, start, end, {{"microbatch", 1}});
  }
  t.flush();
  const json trace = read_json(dir / "t.rank0.json");
  const json step = events_named(trace, "step 1").at(0), fwd = events_named(trace, "forward").at(0);
  CHECK(fwd["ph"] == "X");
  CHECK(fwd["tid"] == 0);
  CHECK(fwd["args"] == json{{"microbatch", 1}});
  CHECK(fwd["dur"].get<double>() >= 2000);
  CHECK(fwd["ts"].get<double>() >= step["ts"].get<double>());
  CHECK(fwd["ts"].get<double>() + fwd["dur"].get<double>() <= step["ts"].get<double>() + step["dur"].get<double>());
}

TEST_CASE("on the CPU a span starts exactly where its start event was recorded, whichever anchor places it") {
  // Two anchors (the step's and the pipeline's) place spans of one step. Had an anchor read the
  // clock again after recording its event, a preemption between the two reads would shift all its
  // spans (CI saw a forward start before its step); from the event's own stamp both agree exactly.
  const fs::path dir = temp_dir("trace_anchor_clock");
  Tracer t((dir / "t.json").string(), 0);
  const Stream stream;
  const TraceAnchor step_anchor = t.anchor(stream);
  const Event step_start = stream.record();
  const TraceAnchor pipeline_anchor = t.anchor(stream);
  const Event start = stream.record(), end = stream.record();
  t.span("step", "compute", step_anchor, step_start, end);
  t.span("forward", "compute", pipeline_anchor, start, end);
  t.flush();
  const json trace = read_json(dir / "t.rank0.json");
  const double origin_us = trace["otherData"]["steady_clock_origin_us"].get<double>();
  const auto on_trace_us = [&](const Event& e) {
    return std::chrono::duration<double, std::micro>(e.host_time().time_since_epoch()).count() - origin_us;
  };
  // The file prints microseconds with 3 decimals (1 ns), and the origin is steady-clock microseconds
  // since boot, whose doubles are spaced origin * 2^-52 apart (a few ns after months of uptime); a
  // second clock read takes tens of ns.
  const double tolerance = 0.002 + 4 * origin_us * 0x1p-52;
  CHECK(std::abs(events_named(trace, "step").at(0)["ts"].get<double>() - on_trace_us(step_start)) <= tolerance);
  CHECK(std::abs(events_named(trace, "forward").at(0)["ts"].get<double>() - on_trace_us(start)) <= tolerance);
}

TEST_CASE("a span waits for nothing: it is kept until its end event completes, and flush waits for the rest") {
  using test::FakeEvents;
  const Backend device = FakeEvents::device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const fs::path dir = temp_dir("trace_pending");
  Tracer t((dir / "t.json").string(), 0);
  const Stream stream(Device::kCuda);
  const TraceAnchor anchor = t.anchor(stream);                     // event 1
  const Event a_start = stream.record(), a_end = stream.record();  // 2, 3
  t.span("a", "compute", anchor, a_start, a_end);
  CHECK(t.num_events() == 0);  // event 3 is still in flight
  FakeEvents::completed = 3;
  const Event b_start = stream.record(), b_end = stream.record();  // 4, 5
  t.span("b", "compute", anchor, b_start, b_end);
  CHECK(t.num_events() == 1);  // a, not b
  CHECK(FakeEvents::waited.empty());
  t.flush();
  CHECK(FakeEvents::waited == std::vector<int>{5});  // b's end
  CHECK(FakeEvents::early_reads == 0);
  const json trace = read_json(dir / "t.rank0.json");
  const json a = events_named(trace, "a").at(0), b = events_named(trace, "b").at(0);
  CHECK(b["ts"].get<double>() - a["ts"].get<double>() == Approx(2000));  // events 2 and 4: 2 ms apart
  CHECK(a["dur"].get<double>() == Approx(1000));
  CHECK(b["dur"].get<double>() == Approx(1000));
}

TEST_CASE("two threads emit concurrently") {
  const fs::path dir = temp_dir("trace_threads");
  constexpr int kPerThread = 2000;
  {
    Tracer t((dir / "t.json").string(), 1);
    std::atomic<bool> go{false};
    auto work = [&](const char* category) {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        TraceScope s = t.scope("work", category, {{"i", i}});
        if (i % 100 == 0) t.instant("tick", category);
      }
    };
    std::thread a(work, "compute"), b(work, "data.prefetch");
    go = true;
    a.join();
    b.join();
    CHECK(t.num_events() == 2 * (kPerThread + kPerThread / 100));
  }  // the destructor writes the file
  const json trace = read_json(dir / "t.rank1.json");
  int lane0 = 0, lane4 = 0;
  for (const json& e : events_named(trace, "work")) (e["tid"] == 0 ? lane0 : lane4) += 1;
  CHECK(lane0 == kPerThread);
  CHECK(lane4 == kPerThread);
}

TEST_CASE("events past the cap are dropped and the file says so") {
  const fs::path dir = temp_dir("trace_cap");
  Tracer t((dir / "t.json").string(), 0, /*max_events=*/10);
  for (int i = 0; i < 25; ++i) t.instant("e", "compute");
  CHECK(t.num_events() == 10);
  CHECK(t.dropped_events() == 15);
  t.flush();
  const json trace = read_json(dir / "t.rank0.json");
  CHECK(events_named(trace, "e").size() == 10);
  CHECK(trace["otherData"]["truncated"] == true);
  CHECK(trace["otherData"]["dropped_events"] == 15);
  REQUIRE(events_named(trace, "trace truncated").size() == 1);
}

TEST_CASE("flush rewrites the whole file each time") {
  const fs::path dir = temp_dir("trace_reflush");
  Tracer t((dir / "t.json").string(), 0);
  t.instant("a", "compute");
  t.flush();
  CHECK(events_named(read_json(dir / "t.rank0.json"), "a").size() == 1);
  t.instant("b", "compute");
  t.flush();
  const json trace = read_json(dir / "t.rank0.json");
  CHECK(events_named(trace, "a").size() == 1);
  CHECK(events_named(trace, "b").size() == 1);
}

TEST_CASE("a trace that cannot be written at the end is reported once, naming logging.trace_file") {
  const fs::path dir = temp_dir("trace_unwritable");
  const std::string text = lattice::testing::captured_log([&] {
    Tracer t((dir / "sub" / "t.json").string(), 0);
    t.instant("a", "compute");
    fs::remove_all(dir / "sub");
    std::ofstream(dir / "sub") << "a file where the directory was";
  });  // the destructor's flush fails and logs
  CHECK_THAT(text, Catch::Contains("logging.trace_file: cannot open '" + (dir / "sub" / "t.rank0.json.tmp").string() +
                                   "' for writing: Not a directory"));
  CHECK_THAT(text, !Catch::Contains("trace: trace:"));
}

TEST_CASE("a trace write that fails (a full disk) is reported once, with the system's reason, and leaves no .tmp") {
  const fs::path dir = temp_dir("trace_full");
  std::string thrown;
  const std::string log = lattice::testing::captured_log([&] {
    Tracer t((dir / "t.json").string(), 0);
    for (int i = 0; i < 2000; ++i) t.instant("event", "compute");
    // A file-size limit makes the write fail as a full disk does (EFBIG instead of ENOSPC).
    struct rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    try {
      t.flush();
    } catch (const std::exception& e) {
      thrown = e.what();
    }
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    std::signal(SIGXFSZ, old_handler);
  });  // the destructor does not report it again
  CHECK_THAT(thrown, Catch::Contains("logging.trace_file: writing '" + (dir / "t.rank0.json.tmp").string() +
                                     "' failed: File too large"));
  CHECK_THAT(log, !Catch::Contains("logging.trace_file"));
  CHECK_FALSE(fs::exists(dir / "t.rank0.json.tmp"));
}

// Tracer::align_origin_after_barrier (one process, no MPI): the barrier is polled until it says done,
// the origin moves to that instant, and what was recorded before — events, a scope still open, an
// anchor, a pending span — keeps its real place on the new timeline; otherData says how the origin
// was taken.
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
  const double before = only_event(trace, "before")["ts"].get<double>();
  CHECK(before <= -30000);
  CHECK(before > -10'000'000);
  const double after = only_event(trace, "after")["ts"].get<double>();
  CHECK(after >= 0);
  CHECK(after < 1'000'000);
  // The scope and the span opened before the alignment and closed after it: they start where they
  // started (with "before", ahead of the origin) and cover the alignment.
  for (const char* name : {"open across", "span across"}) {
    INFO(name);
    const json e = only_event(trace, name);
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    CHECK(ts >= before);
    CHECK(ts - before < 5000);
    CHECK(ts + dur >= after - 1);
  }
}
