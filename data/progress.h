// ProgressReporter: the progress display of `lattice data prepare` — a redrawn bar on a terminal,
// a plain log line every few seconds otherwise (bytes read of the total, MB/s, documents, tokens, ETA).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace lattice {

struct ProgressSnapshot {
  int64_t bytes = 0, total_bytes = 0, documents = 0, tokens = 0;
  double seconds = 0;  // since the start
};

// "45.2% 123.4/273.1 MB, 56.7 MB/s, 12,345 docs, 1.23M tokens, ETA 0:12" (no bar, no newline).
std::string format_progress(const ProgressSnapshot& s);

class ProgressReporter {
 public:
  enum class Mode { kNone, kBar, kLog };
  // "auto" → kBar if stderr is a terminal, else kLog; "bar", "log", "none". Throws InputError
  // naming `flag` for anything else.
  static Mode parse_mode(const std::string& value, const std::string& flag = "--progress");

  ProgressReporter(Mode mode, int64_t total_bytes, double log_interval_s = 5.0);
  ~ProgressReporter();

  // Cheap unless a redraw / log line is due (bar: every 0.1 s; log: every log_interval_s).
  void update(int64_t bytes, int64_t documents, int64_t tokens);
  // Clears the bar (the final summary is logged by the caller).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  ProgressSnapshot snapshot(int64_t bytes, int64_t documents, int64_t tokens) const;

  Mode mode_;
  int64_t total_bytes_;
  double interval_s_;
  Clock::time_point start_, next_;
  bool drawn_ = false;
};

}  // namespace lattice
