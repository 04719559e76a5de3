// Metrics file (JSON lines) and the step log line.
#include "trainer/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

namespace {

// The file open as `fd` truncated back to just after its last newline (to 0 without one); returns
// the bytes dropped. A file that ends in a newline, is empty or is not a regular file is left alone.
int64_t drop_torn_last_line(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return 0;
  const auto refuse = [&](const char* what) {
    throw InputError(fmt::format("logging.metrics_file: cannot {} '{}': {}; check the file and its permissions", what,
                                 path, std::strerror(errno)));
  };
  char last = 0;
  if (::pread(fd, &last, 1, st.st_size - 1) != 1) refuse("read");
  if (last == '\n') return 0;
  off_t keep = 0;  // the length up to and including the last newline (0: one torn line, nothing before it)
  char block[4096];
  for (off_t pos = st.st_size; pos > 0 && keep == 0; pos -= std::min<off_t>(pos, sizeof block)) {
    const off_t begin = pos - std::min<off_t>(pos, sizeof block);
    if (::pread(fd, block, static_cast<size_t>(pos - begin), begin) != pos - begin) refuse("read");
    for (off_t i = pos - begin - 1; i >= 0; --i)
      if (block[i] == '\n') {
        keep = begin + i + 1;
        break;
      }
  }
  if (::ftruncate(fd, keep) != 0) refuse("truncate");
  return st.st_size - keep;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);  // read too: for the torn-line check
  if (fd_ < 0)
    throw InputError(fmt::format("logging.metrics_file: cannot open '{}' for appending: {}; check the directory exists "
                                 "and is writable",
                                 path, std::strerror(errno)));
  // A run that appends after a torn line would glue its run_start onto it, and every reader would
  // stop at that line for good.
  const int64_t dropped = drop_torn_last_line(fd_, path);
  if (dropped > 0)
    spdlog::warn("logging.metrics_file '{}' ended in a torn line (a write cut off by a full disk, or a killed run): "
                 "dropped its last {} byte(s), after the last newline, so that every line stays JSON",
                 path, dropped);
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::write_line(nlohmann::json line) {
  if (path_.empty()) return;
  // Unix seconds (UTC) with millisecond resolution.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  line["time"] = static_cast<double>(ms.count()) / 1e3;
  const std::string text = line.dump() + '\n';
  struct stat before {};
  const bool regular = ::fstat(fd_, &before) == 0 && S_ISREG(before.st_mode);
  // One write(2) per line, no buffer: outside tools tail this file while the run goes on.
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int reason = n < 0 ? errno : EIO;
      // Best effort: cut what this line got written, so the file still ends in a newline (if this
      // fails too, the next run's MetricsWriter drops the torn line).
      if (regular) {
        [[maybe_unused]] const int cut = ::ftruncate(fd_, before.st_size);
      }
      throw Error(fmt::format("logging.metrics_file: writing '{}' failed: {}; free space there (or give another "
                              "logging.metrics_file), then start the run again to resume from its last checkpoint",
                              path_, std::strerror(reason)));
    }
    done += static_cast<size_t>(n);
  }
}

void MetricsWriter::write_run_start(const RunStart& r) {
  write_line({{"run_start",
               {{"config_hash", r.config_hash},
                {"resumed_from_step", r.resumed_from_step},
                {"world_size", r.world_size},
                {"train_iters", r.train_iters},
                {"precision", r.precision},
                {"grad_reduce_dtype", r.grad_reduce_dtype}}}});
}

void MetricsWriter::write_step(const StepMetrics& m) {
  nlohmann::json j = {{"step", m.step},       {"loss", m.loss},     {"grad_norm", m.grad_norm},
                      {"lr", m.lr},           {"tokens_per_s", m.tokens_per_s},
                      {"step_ms", m.step_ms}, {"gflops", m.gflops},
                      {"data_wait_ms", m.data_wait_ms}};
  if (m.bubble >= 0) j["bubble"] = m.bubble;
  if (m.dp_comm_hidden >= 0) j["dp_comm_hidden"] = m.dp_comm_hidden;
  write_line(std::move(j));
}

void MetricsWriter::write_summary(const RunSummary& s) {
  nlohmann::json j = {{"steps", s.steps}, {"tokens", s.tokens}, {"wall_s", s.wall_s}};
  auto put = [&](const char* key, double v) {
    if (v >= 0) j[key] = v;
  };
  put("tokens_per_s", s.tokens_per_s);
  put("gflops", s.gflops);
  put("mfu", s.mfu);
  put("final_loss", s.final_loss);
  put("val_loss", s.val_loss);
  put("bubble_measured", s.bubble_measured);
  put("bubble_theory", s.bubble_theory);
  put("peak_host_bytes", s.peak_host_bytes);
  put("peak_device_bytes", s.peak_device_bytes);
  put("device_outside_pool_bytes", s.device_outside_pool_bytes);
  put("predicted_peak_bytes", s.predicted_peak_bytes);
  put("predicted_storage_bytes", s.predicted_storage_bytes);
  put("start_host_bytes", s.start_host_bytes);
  put("peak_allocated_bytes", s.peak_allocated_bytes);
  put("dp_comm_hidden", s.dp_comm_hidden);
  put("dp_comm_s", s.dp_comm_s);
  put("dp_wait_s", s.dp_wait_s);
  if (!s.precision.empty()) j["precision"] = s.precision;
  if (!s.grad_reduce_dtype.empty()) j["grad_reduce_dtype"] = s.grad_reduce_dtype;
  write_line({{"summary", j}});
}

void MetricsWriter::write_validation(int64_t step, double val_loss) {
  write_line({{"step", step}, {"val_loss", val_loss}});
}

std::string format_duration(double seconds) {
  const int64_t s = std::llround(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

void ProgressLine::add(const StepMetrics& m) {
  if (steps_ == 0) first_step_ = m.step;
  last_ = m;
  steps_ += 1;
  loss_ += m.loss;
  tokens_ += m.tokens_per_s * m.step_ms / 1e3;
  gflop_ += m.gflops * m.step_ms / 1e3;
  step_ms_ += m.step_ms;
  data_wait_ms_ += m.data_wait_ms;
}

void ProgressLine::log() {
  if (steps_ == 0) return;
  const double n = static_cast<double>(steps_);
  const double seconds = step_ms_ / 1e3;
  const std::string over = steps_ > 1 ? fmt::format(" (mean of steps {}-{})", first_step_, last_.step) : "";
  spdlog::info("step {:>6}/{} | loss {:.4f}{} | lr {:.3e} | grad_norm {:.3f} | {:>9.1f} tok/s | {:>8.1f} ms | {:>7.1f} "
               "GFLOP/s | data wait {:.2f} ms | elapsed {} | ETA {}",
               last_.step, last_.train_iters, loss_ / n, over, last_.lr, last_.grad_norm, tokens_ / seconds,
               step_ms_ / n, gflop_ / seconds, data_wait_ms_ / n, format_duration(last_.elapsed_s),
               format_duration(last_.eta_s));
  *this = ProgressLine();
}

void log_run_summary(const RunSummary& s, int64_t first_step, int64_t last_step, int64_t train_iters,
                     const RunOutputs& outputs) {
  spdlog::info("run summary: {} step(s) ({}), {} tokens, wall time {} ({:.1f} s)", s.steps,
               s.steps > 0 ? fmt::format("{}..{} of {}", first_step, last_step, train_iters)
                           : fmt::format("none left of {}", train_iters),
               s.tokens, format_duration(s.wall_s), s.wall_s);
  if (s.tokens_per_s < 0) {
    spdlog::info("  throughput: not measured (it times the steps after the first, and this run trained {})",
                 s.steps == 0 ? "none" : "one");
  } else {
    spdlog::info("  throughput: {:.1f} tokens/s, {:.1f} GFLOP/s achieved ({}); {}", s.tokens_per_s, s.gflops,
                 s.timed_steps < s.steps ? fmt::format("tokens over time of the {} step(s) after the first", s.timed_steps)
                                         : "of its one step, warm-up included",
                 s.mfu >= 0 ? fmt::format("MFU {:.1f}% of logging.peak_gflops", 100 * s.mfu)
                            : "MFU not reported: set logging.peak_gflops to the hardware's peak (`lattice bench` "
                              "measures this machine's sgemm peak)");
  }
  if (s.final_loss >= 0)
    spdlog::info("  loss: final {:.4f}{}", s.final_loss,
                 s.val_loss >= 0 ? fmt::format(", validation {:.4f}", s.val_loss) : "");
  std::string where;
  auto add = [&](const char* what, const std::string& path) {
    if (!path.empty()) where += fmt::format("{}{} {}", where.empty() ? "" : "; ", what, path);
  };
  add("metrics", outputs.metrics_file);
  add("checkpoint", outputs.checkpoint);
  add("export", outputs.export_dir);
  add("trace", outputs.trace_file);
  add("tensorboard", outputs.tensorboard_file);
  spdlog::info("  outputs: {}", where.empty() ? "none (no metrics file, checkpoint, export, trace or TensorBoard events were asked for)" : where);
}

}  // namespace lattice
