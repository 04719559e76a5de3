// Metrics file (JSON lines) and the step log line.
#include "trainer/metrics.h"

#include <filesystem>

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

void MetricsWriter::write_line(const std::string& line) {
  if (path_.empty()) return;
  file_ << line << '\n';
  file_.flush();  // outside tools tail this file while the run goes on
  if (!file_) throw Error("writing metrics to '" + path_ + "' failed (disk full?)");
}

void MetricsWriter::write_step(const StepMetrics& m) {
  nlohmann::json j = {{"step", m.step},       {"loss", m.loss},     {"grad_norm", m.grad_norm},
                      {"lr", m.lr},           {"tokens_per_s", m.tokens_per_s},
                      {"step_ms", m.step_ms}, {"gflops", m.gflops},
                      {"data_wait_ms", m.data_wait_ms}};
  if (m.bubble >= 0) j["bubble"] = m.bubble;
  if (m.dp_comm_hidden >= 0) j["dp_comm_hidden"] = m.dp_comm_hidden;
  write_line(j.dump());
}

void MetricsWriter::write_summary(const ParallelSummary& s) {
  nlohmann::json j = {{"steps", s.steps}};
  auto put = [&](const char* key, double v) {
    if (v >= 0) j[key] = v;
  };
  put("bubble_measured", s.bubble_measured);
  put("bubble_theory", s.bubble_theory);
  put("dp_comm_hidden", s.dp_comm_hidden);
  put("dp_comm_s", s.dp_comm_s);
  put("dp_wait_s", s.dp_wait_s);
  write_line(nlohmann::json{{"summary", j}}.dump());
}

void MetricsWriter::write_validation(int64_t step, double val_loss) {
  write_line(nlohmann::json{{"step", step}, {"val_loss", val_loss}}.dump());
}

void log_step(const StepMetrics& m) {
  spdlog::info("step {:>6}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:>9.1f} tok/s | {:>8.1f} ms | {:>7.1f} GFLOP/s | data wait {:.2f} ms",
               m.step, m.train_iters, m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms, m.gflops,
               m.data_wait_ms);
}

}  // namespace lattice
