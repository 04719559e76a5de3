// Tracer: Chrome-trace JSON events buffered in memory, written atomically per rank.
#include "parallel/trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

namespace {

// The fixed lanes; other categories get lanes from kFirstFreeLane on, in order of first use.
const std::pair<const char*, int> kFixedLanes[] = {
    {"compute", 0}, {"communication", 1}, {"data", 2}, {"optimizer", 3}};
constexpr int kFirstFreeLane = 4;

std::string json_string(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// TraceScope

TraceScope::TraceScope(TraceScope&& other) noexcept
    : tracer_(other.tracer_),
      name_(std::move(other.name_)),
      category_(std::move(other.category_)),
      args_json_(std::move(other.args_json_)),
      start_(other.start_) {
  other.tracer_ = nullptr;
}

TraceScope& TraceScope::operator=(TraceScope&& other) noexcept {
  if (this != &other) {
    end();
    tracer_ = other.tracer_;
    name_ = std::move(other.name_);
    category_ = std::move(other.category_);
    args_json_ = std::move(other.args_json_);
    start_ = other.start_;
    other.tracer_ = nullptr;
  }
  return *this;
}

void TraceScope::end() {
  if (tracer_ == nullptr) return;
  Tracer* t = tracer_;
  tracer_ = nullptr;
  const auto end = std::chrono::steady_clock::now();
  t->record(Tracer::Event{'X', 0, t->us_since_origin(start_),
                          std::chrono::duration<double, std::micro>(end - start_).count(), std::move(name_),
                          std::move(category_), std::move(args_json_)});
}

// ---------------------------------------------------------------------------------------------
// Tracer

Tracer::Tracer(std::string path, int rank, size_t max_events)
    : path_(path.empty() ? std::string() : trace_path_for_rank(path, rank)),
      rank_(rank),
      max_events_(max_events),
      origin_(std::chrono::steady_clock::now()) {
  for (const auto& [category, lane] : kFixedLanes) lanes_.emplace(category, lane);
  if (!enabled()) return;
  const auto parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (!parent.empty() && !std::filesystem::is_directory(parent))
    throw InputError(fmt::format("logging.trace_file: cannot create the directory '{}' for '{}'", parent.string(),
                                 path_));
}

Tracer::~Tracer() {
  bool dirty;
  {
    std::lock_guard<std::mutex> pending_lock(pending_mutex_);
    std::lock_guard<std::mutex> lock(mutex_);
    dirty = dirty_ || !pending_.empty();
  }
  if (!dirty) return;
  try {
    flush();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());  // flush's messages name logging.trace_file themselves
  }
}

double Tracer::us_since_origin(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Tracer::align_origin_after_barrier(int ranks, const std::function<bool()>& barrier_done) {
  // No sleeping back-off while polling (a communicator's wait sleeps up to 0.5 ms between polls, as
  // much exit skew): the clock is read right as this rank sees the barrier complete.
  while (!barrier_done()) std::this_thread::yield();
  const auto origin = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> pending_lock(pending_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  // What was recorded so far moves with the origin: the same instants, measured from the new one.
  const double shift_us = std::chrono::duration<double, std::micro>(origin_ - origin).count();
  for (Event& e : events_) e.ts_us += shift_us;
  origin_ = origin;
  origin_barrier_ranks_ = ranks;
  dirty_ = dirty_ || !events_.empty();  // a file already written holds the old times
}

std::string trace_label(std::string_view name, TraceArgs args) {
  std::string label(name);
  for (const TraceArg& a : args) {
    switch (a.kind_) {
      case TraceArg::Kind::kInt: label += fmt::format(" {}={}", a.key_, a.int_); break;
      case TraceArg::Kind::kDouble: label += fmt::format(" {}={}", a.key_, a.double_); break;
      case TraceArg::Kind::kString: label += fmt::format(" {}={}", a.key_, a.string_); break;
    }
  }
  return label;
}

std::string Tracer::args_to_json(TraceArgs args) {
  if (args.size() == 0) return {};
  nlohmann::json j = nlohmann::json::object();
  for (const TraceArg& a : args) {
    const std::string key(a.key_);
    switch (a.kind_) {
      case TraceArg::Kind::kInt: j[key] = a.int_; break;
      case TraceArg::Kind::kDouble: j[key] = a.double_; break;
      case TraceArg::Kind::kString: j[key] = std::string(a.string_); break;
    }
  }
  return j.dump();
}

TraceScope Tracer::scope(std::string_view name, std::string_view category, TraceArgs args) {
  TraceScope s;
  if (!enabled()) return s;
  s.tracer_ = this;
  s.name_ = name;
  s.category_ = category;
  s.args_json_ = args_to_json(args);
  s.start_ = std::chrono::steady_clock::now();  // last, so that formatting the args is not inside the interval
  return s;
}

TraceAnchor Tracer::anchor(const Stream& stream) const {
  // The event's own host stamp places it (record_pending), not a second clock read: on the CPU every
  // span is then placed from one reading per event, so a span anchored in one place nests exactly
  // inside one anchored in another (a preemption between two reads would shift one anchor's spans
  // against the other's).
  return TraceAnchor{stream.record()};
}

void Tracer::span(std::string_view name, std::string_view category, const TraceAnchor& anchor,
                  const lattice::Event& start, const lattice::Event& end, TraceArgs args) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back({anchor, start, end, std::string(name), std::string(category), args_to_json(args)});
  }
  record_pending(false);
}

void Tracer::record_pending(bool wait) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  size_t done = 0;
  for (; done < pending_.size() && (wait || pending_[done].end.query()); ++done) {
    PendingSpan& p = pending_[done];
    if (wait) p.end.synchronize();  // then the anchor and start, earlier on the stream, are complete too
    record(Event{'X', 0, us_since_origin(p.anchor.event.host_time()) + 1e6 * p.start.seconds_since(p.anchor.event),
                 1e6 * p.end.seconds_since(p.start), std::move(p.name), std::move(p.category),
                 std::move(p.args_json)});
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
}

void Tracer::instant(std::string_view name, std::string_view category, TraceArgs args) {
  if (!enabled()) return;
  record(Event{'i', 0, now_us(), 0, std::string(name), std::string(category), args_to_json(args)});
}

void Tracer::counter(std::string_view name, TraceArgs values) {
  if (!enabled()) return;
  for (const TraceArg& a : values)
    LATTICE_CHECK(a.kind_ != TraceArg::Kind::kString, "trace counter '{}': series '{}' is not a number", name, a.key_);
  record(Event{'C', 0, now_us(), 0, std::string(name), "counter", args_to_json(values)});
}

int Tracer::lane_for_locked(std::string_view category) {
  auto it = lanes_.find(category);
  if (it != lanes_.end()) return it->second;
  const int lane = kFirstFreeLane + static_cast<int>(lanes_.size()) - static_cast<int>(std::size(kFixedLanes));
  lanes_.emplace(std::string(category), lane);
  return lane;
}

void Tracer::record(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.size() >= max_events_) {
    if (dropped_++ == 0)
      spdlog::warn("trace: {} holds {} events, its cap; later events are dropped", path_, max_events_);
    dirty_ = true;
    return;
  }
  event.lane = event.phase == 'C' ? 0 : lane_for_locked(event.category);
  events_.push_back(std::move(event));
  dirty_ = true;
}

size_t Tracer::num_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

size_t Tracer::dropped_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void Tracer::flush() {
  if (!enabled()) return;
  record_pending(true);
  std::lock_guard<std::mutex> lock(mutex_);
  // In time order; at equal start the longer (enclosing) event first, so parents precede children.
  std::vector<size_t> order(events_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Event &x = events_[a], &y = events_[b];
    if (x.ts_us != y.ts_us) return x.ts_us < y.ts_us;
    return x.dur_us > y.dur_us;
  });

  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out)
      throw Error(fmt::format("logging.trace_file: cannot open '{}' for writing: {}", tmp, std::strerror(errno)));
    out << "{\"traceEvents\": [\n";
    // Metadata: the process is the rank, the threads are the lanes.
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{0},"tid":0,"args":{{"name":"rank {0}"}}}})",
                       rank_);
    out << fmt::format(R"(,
{{"ph":"M","name":"process_sort_index","pid":{0},"tid":0,"args":{{"sort_index":{0}}}}})",
                       rank_);
    std::vector<std::pair<int, std::string>> lanes;
    for (const auto& [category, lane] : lanes_) lanes.emplace_back(lane, category);
    std::sort(lanes.begin(), lanes.end());
    for (const auto& [lane, category] : lanes) {
      out << fmt::format(R"(,
{{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                         rank_, lane, json_string(category));
      out << fmt::format(R"(,
{{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
                         rank_, lane, lane);
    }
    double last_us = 0;
    for (size_t i : order) {
      const Event& e = events_[i];
      out << fmt::format(R"(,
{{"ph":"{}","name":{},"cat":{},"pid":{},"tid":{},"ts":{:.3f})",
                         e.phase, json_string(e.name), json_string(e.category), rank_, e.lane, e.ts_us);
      if (e.phase == 'X') out << fmt::format(R"(,"dur":{:.3f})", e.dur_us);
      if (e.phase == 'i') out << R"(,"s":"t")";
      if (!e.args_json.empty()) out << ",\"args\":" << e.args_json;
      out << '}';
      last_us = std::max(last_us, e.ts_us + e.dur_us);
    }
    if (dropped_ > 0) {
      out << fmt::format(R"(,
{{"ph":"i","name":"trace truncated","cat":"trace","pid":{},"tid":0,"ts":{:.3f},"s":"p","args":{{"dropped_events":{},"max_events":{}}}}})",
                         rank_, last_us, dropped_, max_events_);
    }
    const double origin_us =
        std::chrono::duration<double, std::micro>(origin_.time_since_epoch()).count();
    out << fmt::format(R"(
],
"displayTimeUnit": "ms",
"otherData": {{"rank": {}, "steady_clock_origin_us": {:.3f}, "time_origin": "{}"{}, "events": {}, "dropped_events": {}, "max_events": {}, "truncated": {}}}
}}
)",
                       rank_, origin_us, origin_barrier_ranks_ > 0 ? "barrier" : "created",
                       origin_barrier_ranks_ > 0 ? fmt::format(R"(, "time_origin_ranks": {})", origin_barrier_ranks_)
                                                 : std::string(),
                       events_.size(), dropped_, max_events_, dropped_ > 0 ? "true" : "false");
    out.flush();
    if (!out) {
      const std::string reason = std::strerror(errno);
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      dirty_ = false;  // reported once: the destructor's flush would only fail again
      throw Error(fmt::format("logging.trace_file: writing '{}' failed: {}; the trace is not saved", tmp, reason));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_, ec);
  if (ec) throw Error(fmt::format("logging.trace_file: cannot rename '{}' to '{}': {}", tmp, path_, ec.message()));
  dirty_ = false;
}

std::string Tracer::trace_path_for_rank(const std::string& path, int rank) {
  static constexpr std::string_view kPlaceholder = "{rank}";
  const std::string r = std::to_string(rank);
  if (path.find(kPlaceholder) != std::string::npos) {
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = path.find(kPlaceholder, pos)) != std::string::npos; pos = hit + kPlaceholder.size())
      out.append(path, pos, hit - pos).append(r);
    return out.append(path, pos, std::string::npos);
  }
  const std::filesystem::path p(path);
  const std::string file = p.filename().string();
  const std::string ext = p.extension().string();  // "" for "trace" and ".trace"
  const std::string renamed = file.substr(0, file.size() - ext.size()) + ".rank" + r + ext;
  return (p.parent_path() / renamed).string();
}

}  // namespace lattice
