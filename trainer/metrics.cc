// Metrics file (JSON lines) and the step log line.
#include "trainer/metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_.open(path, std::ios::app);
  if (!file_) throw InputError("logging.metrics_file: cannot open '" + path + "' for appending; check the directory exists and is writable");
}

void MetricsWriter::write_line(nlohmann::json line) {
  if (path_.empty()) return;
  // Unix seconds (UTC) with millisecond resolution.
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  line["time"] = static_cast<double>(ms.count()) / 1e3;
  file_ << line.dump() << '\n';
  file_.flush();  // outside tools tail this file while the run goes on
  if (!file_) throw Error("writing metrics to '" + path_ + "' failed (disk full?)");
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
  nlohmann::json j = {{"steps", s.steps}, {"tokens", s.tokens}, {"wall_s", s.wall_s},
                      {"tokens_per_s", s.tokens_per_s}, {"gflops", s.gflops}};
  auto put = [&](const char* key, double v) {
    if (v >= 0) j[key] = v;
  };
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

void log_step(const StepMetrics& m) {
  spdlog::info("step {:>6}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:>9.1f} tok/s | {:>8.1f} ms | {:>7.1f} GFLOP/s | data wait {:.2f} ms | elapsed {} | ETA {}",
               m.step, m.train_iters, m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms, m.gflops,
               m.data_wait_ms, format_duration(m.elapsed_s), format_duration(m.eta_s));
}

void log_run_summary(const RunSummary& s, int64_t first_step, int64_t last_step, int64_t train_iters,
                     const RunOutputs& outputs) {
  spdlog::info("run summary: {} step(s) ({}), {} tokens, wall time {} ({:.1f} s)", s.steps,
               s.steps > 0 ? fmt::format("{}..{} of {}", first_step, last_step, train_iters)
                           : fmt::format("none left of {}", train_iters),
               s.tokens, format_duration(s.wall_s), s.wall_s);
  spdlog::info("  throughput: {:.1f} tokens/s, {:.1f} GFLOP/s achieved (means over the steps after the first); {}",
               s.tokens_per_s, s.gflops,
               s.mfu >= 0 ? fmt::format("MFU {:.1f}% of logging.peak_gflops", 100 * s.mfu)
                          : "MFU not reported: set logging.peak_gflops to the hardware's peak (`lattice bench` "
                            "measures this machine's sgemm peak)");
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
