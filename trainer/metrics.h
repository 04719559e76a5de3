// Metrics: the per-step numbers the program prints (one spdlog line per log_interval) and
// appends to logging.metrics_file as one JSON object per line. Key names are a contract with
// outside tools: step, loss, grad_norm, lr, tokens_per_s, step_ms (plus gflops, data_wait_ms, val_loss,
// bubble, dp_comm_hidden, summary, run_start, time).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

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
  // Log line only: time since this run's first step began, and the remaining steps at this run's
  // mean step time so far.
  double elapsed_s = 0;
  double eta_s = 0;
};

// The first line a run writes: which run the following lines belong to.
struct RunStart {
  std::string config_hash;        // config_hash() of the resolved config
  int64_t resumed_from_step = 0;  // the checkpoint's step, 0 for a fresh start
  int world_size = 1;
  int64_t train_iters = 0;
  std::string precision;          // training.precision: fp32 or bf16
  std::string grad_reduce_dtype;  // parallel.grad_reduce_dtype
};

// The run's totals, written once at the end (keys omitted when negative).
struct RunSummary {
  int64_t steps = 0;            // steps this run took
  int64_t tokens = 0;           // tokens those steps trained on
  double wall_s = 0;            // from the start of training (model built, checkpoint loaded) to the end
  int64_t timed_steps = 0;      // the steps the throughput is measured over: those after the first
  double tokens_per_s = -1;     // their tokens over their time (-1: no step timed, omitted)
  double gflops = -1;           // achieved GFLOP/s over the same steps
  double mfu = -1;              // gflops / logging.peak_gflops, only when that peak is set
  double final_loss = -1;       // the last step's loss
  double val_loss = -1;         // the last validation loss
  double bubble_measured = -1;  // mean over the steps after the first
  double bubble_theory = -1;    // (p-1)/(m+p-1), or (p-1)/(v·m+p-1) interleaved
  double dp_comm_hidden = -1;   // 1 - blocked / outstanding, over all steps
  double dp_comm_s = -1;
  double dp_wait_s = -1;
  double peak_host_bytes = -1;    // the largest rank's peak resident host memory (getrusage ru_maxrss)
  double peak_device_bytes = -1;  // GPU: the most device memory in use at once (the pool's high mark)
  // GPU: the device's memory in use beyond the pool at the end of the run, of the rank with the
  // largest pool high mark (the CUDA context, the libraries, NCCL's buffers, other processes).
  double device_outside_pool_bytes = -1;
  // The memory plan (trainer/memory_plan.h) against the measured peaks: predicted_peak_bytes is the
  // largest rank's (compare peak_host_bytes, the largest RSS); the storage pair is of the rank with
  // the largest tensor storage high mark (host storage on CPU, the pool on GPU).
  double predicted_peak_bytes = -1;
  double predicted_storage_bytes = -1;
  double start_host_bytes = -1;  // CPU: the largest rank's RSS before the run allocated (in predicted_peak_bytes)
  double peak_allocated_bytes = -1;
  std::string precision;          // training.precision (omitted when empty)
  std::string grad_reduce_dtype;  // parallel.grad_reduce_dtype (omitted when empty)
};

class MetricsWriter {
 public:
  // Empty path: no file. The file is appended to (a resumed run continues it); every line carries
  // "time" (Unix seconds, UTC). An existing file that does not end in a newline ends in a torn line
  // (a write cut off by a full disk, or a killed run): it is truncated back to after its last newline,
  // with a warning saying how many bytes were dropped, so that every line stays JSON.
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  // {"run_start": {...}, "time": t}, written first: where a fresh run appended to an old file, or a
  // resumed one that repeats steps, begins; readers take the last line of each step.
  void write_run_start(const RunStart& r);
  void write_step(const StepMetrics& m);
  void write_validation(int64_t step, double val_loss);
  // {"summary": {...}} (a line without "loss": tools that read steps skip it).
  void write_summary(const RunSummary& s);

 private:
  void write_line(nlohmann::json line);  // adds "time"; an Error with the system's reason when it fails
  std::string path_;
  int fd_ = -1;  // a plain descriptor: a failed write's errno names the reason, and a torn line can be cut
};

// The progress line, one per logging.log_interval steps. Like Megatron-LM's, it averages over the
// steps since the previous line: the loss, step time and data wait are their means (the loss line of
// one step is noise), tokens/s and GFLOP/s their tokens and FLOPs over their time; the grad norm,
// lr, elapsed time and ETA are the last step's.
// The metrics file keeps every step's own figures.
class ProgressLine {
 public:
  void add(const StepMetrics& m);
  // Logs the line for the steps added since the last one (at least one), and starts anew.
  void log();

 private:
  StepMetrics last_;
  int64_t first_step_ = 0;
  int64_t steps_ = 0;
  // Tokens and GFLOP are rate × time summed, so that the line's rates are totals over total time.
  double loss_ = 0, tokens_ = 0, gflop_ = 0, step_ms_ = 0, data_wait_ms_ = 0;
};

// Where a run's outputs went ("" = not written).
struct RunOutputs {
  std::string metrics_file, checkpoint, export_dir, trace_file, tensorboard_file;
};

// The end-of-run summary (spdlog, a few lines): steps and tokens, wall time, mean throughput and MFU
// (or why there is none), the final losses, and the outputs.
void log_run_summary(const RunSummary& s, int64_t first_step, int64_t last_step, int64_t train_iters,
                     const RunOutputs& outputs);

// "1:02:03" (hours:minutes:seconds), "0:00:05".
std::string format_duration(double seconds);

}  // namespace lattice
