// ProgressReporter: formatting and rate-limited output to stderr.
#include "data/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

namespace {

std::string group_thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return v < 0 ? "-" + out : out;
}

std::string short_count(int64_t v) {
  if (v >= 1'000'000'000) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1'000'000) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 10'000) return fmt::format("{:.1f}k", v / 1e3);
  return std::to_string(v);
}

std::string clock_time(double s) {
  auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

}  // namespace

std::string format_progress(const ProgressSnapshot& s) {
  double mbps = s.seconds > 0 ? s.bytes / 1e6 / s.seconds : 0.0;
  std::string pct = s.total_bytes > 0 ? fmt::format("{:.1f}% ", 100.0 * s.bytes / s.total_bytes) : "";
  std::string eta = "?";
  if (s.bytes >= s.total_bytes) {
    eta = "0:00";
  } else if (s.bytes > 0 && s.seconds > 0) {
    eta = clock_time(s.seconds * (s.total_bytes - s.bytes) / s.bytes);
  }
  return fmt::format("{}{:.1f}/{:.1f} MB, {:.1f} MB/s, {} docs, {} tokens, ETA {}", pct, s.bytes / 1e6,
                     s.total_bytes / 1e6, mbps, group_thousands(s.documents), short_count(s.tokens), eta);
}

ProgressReporter::Mode ProgressReporter::parse_mode(const std::string& value, const std::string& flag) {
  if (value == "auto") return ::isatty(STDERR_FILENO) ? Mode::kBar : Mode::kLog;
  if (value == "bar") return Mode::kBar;
  if (value == "log") return Mode::kLog;
  if (value == "none") return Mode::kNone;
  throw InputError(fmt::format("{} {}: expected auto, bar, log or none", flag, value));
}

ProgressReporter::ProgressReporter(Mode mode, int64_t total_bytes, double log_interval_s)
    : mode_(mode), total_bytes_(total_bytes), interval_s_(log_interval_s), start_(Clock::now()) {
  next_ = start_ + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(mode == Mode::kBar ? 0.1 : interval_s_));
}

ProgressReporter::~ProgressReporter() { finish(); }

ProgressSnapshot ProgressReporter::snapshot(int64_t bytes, int64_t documents, int64_t tokens) const {
  ProgressSnapshot s;
  s.bytes = bytes;
  s.total_bytes = total_bytes_;
  s.documents = documents;
  s.tokens = tokens;
  s.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  return s;
}

void ProgressReporter::update(int64_t bytes, int64_t documents, int64_t tokens) {
  if (mode_ == Mode::kNone) return;
  auto now = Clock::now();
  if (now < next_) return;
  ProgressSnapshot s = snapshot(bytes, documents, tokens);
  if (mode_ == Mode::kBar) {
    constexpr int kWidth = 24;
    int filled = total_bytes_ > 0 ? static_cast<int>(kWidth * std::min<double>(1.0, double(bytes) / total_bytes_)) : 0;
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    std::fprintf(stderr, "\r\033[2K[%s] %s", bar.c_str(), format_progress(s).c_str());
    std::fflush(stderr);
    drawn_ = true;
    next_ = now + std::chrono::milliseconds(100);
  } else {
    spdlog::info("data prepare: {}", format_progress(s));
    next_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s_));
  }
}

void ProgressReporter::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[2K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace lattice
