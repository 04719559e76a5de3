// Tracer: a per-process Chrome-trace timeline (logging.trace_file) of what each rank spends its
// time on — compute, communication, data, optimizer — written as JSON that Perfetto opens.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/stream.h"

namespace lattice {

// One key/value of an event's "args": an integer, a number or a string.
class TraceArg {
 public:
  template <std::integral T>
  TraceArg(std::string_view key, T value) : key_(key), kind_(Kind::kInt), int_(static_cast<int64_t>(value)) {}
  TraceArg(std::string_view key, double value) : key_(key), kind_(Kind::kDouble), double_(value) {}
  TraceArg(std::string_view key, std::string_view value) : key_(key), kind_(Kind::kString), string_(value) {}
  TraceArg(std::string_view key, const char* value) : TraceArg(key, std::string_view(value)) {}

 private:
  friend class Tracer;
  friend std::string trace_label(std::string_view name, std::initializer_list<TraceArg> args);
  enum class Kind { kInt, kDouble, kString };
  std::string_view key_;
  Kind kind_;
  int64_t int_ = 0;
  double double_ = 0;
  std::string_view string_;
};
using TraceArgs = std::initializer_list<TraceArg>;

// "name key=value ...": an event as one line, for profilers that take a plain message (NVTX).
std::string trace_label(std::string_view name, TraceArgs args);

class Tracer;

// Where a stream's events sit on a tracer's timeline: an event recorded on the stream, whose host
// stamp (Event::host_time) places it (Tracer::anchor). One per step keeps device and host clocks from
// drifting apart. Kept as a steady-clock time, not as a time since the origin, so an anchor stays
// right across Tracer::align_origin_after_barrier.
struct TraceAnchor {
  Event event;
};

// RAII: records one complete event ("ph":"X") from construction to end() or destruction.
// Move-only; a scope from a disabled tracer does nothing.
class TraceScope {
 public:
  TraceScope() = default;
  TraceScope(TraceScope&& other) noexcept;
  TraceScope& operator=(TraceScope&& other) noexcept;
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  ~TraceScope() { end(); }

  // Records the event now (idempotent).
  void end();

 private:
  friend class Tracer;
  Tracer* tracer_ = nullptr;
  std::string name_;
  std::string category_;
  std::string args_json_;
  std::chrono::steady_clock::time_point start_;  // a clock time: right across an origin alignment
};

// Events are buffered in memory (at most `max_events`; later ones are counted and dropped, which
// the file's "otherData" and a final instant event say) and written by flush(), atomically
// (PATH.tmp, then rename), and again on destruction if anything was recorded since.
//
// Timestamps ("ts") are microseconds of std::chrono::steady_clock since the tracer's origin: its
// creation, or, in a job, the moment align_origin_after_barrier() was called right after a world
// barrier returned (the trainer does that), so that every rank's file shares one origin and the
// files can be put side by side. "otherData" holds the origin in this process's steady-clock
// microseconds ("steady_clock_origin_us"; comparable between processes of one node only) and how
// it was taken ("time_origin": "barrier" with "time_origin_ranks", or "created").
// "pid" is the rank; "tid" is a lane chosen by the event's category: compute 0, communication 1,
// data 2, optimizer 3, any other category the next free lane (named after it by thread_name
// metadata). Complete events on one lane must nest, so one thread emits per lane at a time; a
// background thread uses its own category ("data.prefetch", "communication.async", ...).
// Thread-safe: any thread may emit.
class Tracer {
 public:
  static constexpr size_t kDefaultMaxEvents = 1'000'000;

  // `path` empty: disabled, every call a cheap no-op and nothing is written. Otherwise the file is
  // trace_path_for_rank(path, rank); its directory is created when missing.
  Tracer(std::string path, int rank, size_t max_events = kDefaultMaxEvents);
  ~Tracer();  // flushes if needed; an error is logged, not thrown
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  bool enabled() const { return !path_.empty(); }
  int rank() const { return rank_; }
  const std::string& path() const { return path_; }  // the per-rank file ("" when disabled)

  // Makes the exit of a barrier of all `ranks` ranks the origin of this rank's timeline. Every rank of
  // the job calls it, before the job's events, with a barrier it has started (e.g. a
  // Communicator::barrier_async, started once every rank is known to have got here: after a first,
  // blocking, barrier): `barrier_done` is polled without pause (a yield between polls, for
  // oversubscribed nodes) until it says the barrier completed, and the clock is read at once. Every
  // rank's ts 0 is then the same instant, whatever each rank did before (start-up skew: ms on one node,
  // seconds across nodes), and the ranks' files line up in one timeline: a gradient is never shown
  // received before it was computed. Steady clocks of different nodes are not comparable, so no clock
  // value is exchanged. Accuracy: the barrier's exit skew, the time between the first and the last
  // rank seeing it complete — about one message latency (~1 us over shared memory, a few us over
  // InfiniBand, tens of us over TCP), more when a rank is descheduled as it leaves (an oversubscribed
  // node: up to a scheduler time slice, ms) — plus the nodes' clock-rate difference over the run (NTP
  // keeps it to a few ppm: ~10 ms per hour at 3 ppm); events closer than that across ranks may show in
  // either order. Events recorded before the call are re-based (shifted by the old origin minus the
  // new, so earlier ones get negative ts); open scopes, anchors and pending spans hold clock times and
  // land right too.
  void align_origin_after_barrier(int ranks, const std::function<bool()>& barrier_done);

  // A complete event from now until the scope ends.
  [[nodiscard]] TraceScope scope(std::string_view name, std::string_view category, TraceArgs args = {});
  // Marks `stream`'s current point on the timeline, for span().
  TraceAnchor anchor(const Stream& stream) const;
  // A complete event from `start` to `end`, recorded on `anchor`'s stream after it: timed by the
  // events, so that on a GPU it shows the device executing the work, not the host launching it.
  // Kept pending until `end` has completed (checked by later spans, without waiting; flush() waits),
  // so that tracing a step adds no host synchronization to it.
  void span(std::string_view name, std::string_view category, const TraceAnchor& anchor, const lattice::Event& start,
            const lattice::Event& end, TraceArgs args = {});
  // A zero-duration event ("ph":"i", thread scope).
  void instant(std::string_view name, std::string_view category, TraceArgs args = {});
  // A counter track ("ph":"C") named `name`, one series per arg (numbers only).
  void counter(std::string_view name, TraceArgs values);

  // Writes everything recorded so far (the whole file is rewritten). Throws Error naming the file
  // when it cannot be written. No-op when disabled.
  void flush();

  size_t num_events() const;     // recorded and kept
  size_t dropped_events() const;  // past max_events

  // The per-rank file name: every "{rank}" in `path` replaced by the rank; when there is none,
  // ".rank<r>" inserted before the file name's extension ("runs/t.json" -> "runs/t.rank0.json",
  // "runs/trace" -> "runs/trace.rank0").
  static std::string trace_path_for_rank(const std::string& path, int rank);

 private:
  friend class TraceScope;
  struct Event {
    char phase;
    int lane;
    double ts_us;
    double dur_us;
    std::string name;
    std::string category;
    std::string args_json;  // "{...}" or empty
  };
  struct PendingSpan {
    TraceAnchor anchor;
    lattice::Event start, end;
    std::string name, category, args_json;
  };
  double now_us() const { return us_since_origin(std::chrono::steady_clock::now()); }
  double us_since_origin(std::chrono::steady_clock::time_point t) const;
  static std::string args_to_json(TraceArgs args);
  void record(Event event);
  // Records the pending spans whose end has completed (all of them, waiting, when `wait`), in order.
  void record_pending(bool wait);
  int lane_for_locked(std::string_view category);

  std::string path_;
  int rank_;
  size_t max_events_;
  // Written only by align_origin_after_barrier (under both mutexes), which must not race with
  // emitting threads: it is called before the job's work starts.
  std::chrono::steady_clock::time_point origin_;
  int origin_barrier_ranks_ = 0;  // 0: the origin is the tracer's creation

  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::map<std::string, int, std::less<>> lanes_;  // category -> lane
  size_t dropped_ = 0;
  bool dirty_ = false;

  std::mutex pending_mutex_;  // taken before mutex_, never inside it
  std::vector<PendingSpan> pending_;  // spans in the order given, ends not yet complete
};

}  // namespace lattice
