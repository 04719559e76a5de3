// TensorBoard event files: rank 0 writes the metrics file's scalars (train/loss, val/loss, train/lr,
// ...) to logging.tensorboard_dir, one new events.out.tfevents.* file per run.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainer/metrics.h"

namespace lattice {

class TensorBoardWriter {
 public:
  // Empty dir: writes nothing. Otherwise opens DIR/events.out.tfevents.<unix time>.<hostname>[.N]
  // (never an existing file, so what a killed run left is not read or changed) and writes the
  // file_version event, then a session start at `first_step` (see tensorboard_event.proto). Step
  // scalars are flushed every `flush_interval` steps, the others at once.
  TensorBoardWriter(const std::string& dir, int64_t first_step, int64_t flush_interval);
  void write_step(const StepMetrics& m);
  void write_validation(int64_t step, double val_loss);
  // summary/* at `step`, the run's last step.
  void write_summary(const RunSummary& s, int64_t step);
  const std::string& path() const { return path_; }

 private:
  using Scalars = std::vector<std::pair<std::string_view, double>>;
  void write_scalars(int64_t step, const Scalars& scalars);
  void write_record(const std::string& event);
  void flush();
  std::string path_;
  int64_t flush_interval_ = 1;
  std::ofstream file_;
};

}  // namespace lattice
