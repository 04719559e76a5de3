// Metrics: the per-step numbers the program prints (one spdlog line per log_interval) and
// appends to logging.metrics_file as one JSON object per line. Key names are a contract with
// outside tools: step, loss, grad_norm, lr, tokens_per_s, step_ms (plus gflops, data_wait_ms, val_loss,
// bubble, dp_comm_hidden, summary).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace lattice {

struct StepMetrics {
  int64_t step = 0;
  int64_t train_iters = 0;
  double loss = 0;        // mean token loss over the global batch
  double grad_norm = 0;   // global L2 norm before clipping
  double lr = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  double gflops = 0;      // achieved GFLOP/s of the whole step (model FLOPs / step time)
  double data_wait_ms = 0;  // time the step waited for data (inside step_ms)
  // Written only when >= 0: the measured pipeline bubble of the step (pipeline > 1) and the share of
  // the step's data-parallel gradient communication hidden behind compute (data > 1).
  double bubble = -1;
  double dp_comm_hidden = -1;
};

// The run's parallel efficiency, written once at the end (keys omitted when negative).
struct ParallelSummary {
  int64_t steps = 0;
  double bubble_measured = -1;  // mean over the steps after the first
  double bubble_theory = -1;    // (p-1)/(m+p-1), or (p-1)/(v·m+p-1) interleaved
  double dp_comm_hidden = -1;   // 1 - blocked / outstanding, over all steps
  double dp_comm_s = -1;
  double dp_wait_s = -1;
};

class MetricsWriter {
 public:
  // Empty path: no file. The file is appended to (a resumed run continues it).
  explicit MetricsWriter(const std::string& path);
  void write_step(const StepMetrics& m);
  void write_validation(int64_t step, double val_loss);
  // {"summary": {...}} (a line without "loss": tools that read steps skip it).
  void write_summary(const ParallelSummary& s);

 private:
  void write_line(const std::string& json_line);
  std::string path_;
  std::ofstream file_;
};

// The spdlog line for a step.
void log_step(const StepMetrics& m);

}  // namespace lattice
