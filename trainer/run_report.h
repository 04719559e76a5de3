// `lattice report RUN_DIR...`: reads run folders (logging.run_dir: config.json, metrics.jsonl,
// log.txt) and compares them in one table or CSV — the overrides that differ, status and results.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lattice {

// One run folder as the report sees it. Numbers absent from the metrics file are NaN (kAbsent).
struct RunRecord {
  std::string dir;                                                          // as given on the command line
  nlohmann::json config;                                                    // its config.json
  std::string status;                                                       // finished / stopped / running / failed
  int64_t steps = 0;                                                        // the last step trained
  static constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  double train_loss = kAbsent, val_loss = kAbsent;                          // the last ones logged
  double tokens_per_s = kAbsent, mfu = kAbsent, bubble = kAbsent, dp_comm_hidden = kAbsent;  // the summary's
  // The training device's peak: GPU memory for a GPU run, else rank 0's host RSS (the summary's).
  double peak_mem_bytes = kAbsent;
};

// Reads DIR/config.json and the metrics file it names (a path inside the run's folder is looked for
// in DIR, where the folder is now; unset = DIR/metrics.jsonl). The status comes from the segment after
// the last run_start line (a resumed run appends): a summary whose steps reach training.train_iters =
// finished, one short of it = stopped, none = running while a live process holds the run's checkpoint
// root (checkpoint.dir's lattice.lock, flock-tested), else failed; log.txt ending in an error (its last
// record, however many lines that spans, is at level error or critical) = failed. A missing or
// malformed file is an InputError naming it; a missing metrics file is allowed only when log.txt ends
// in an error (the run failed before step 1) or the run is live (running, 0 steps). A relative
// logging.metrics_file that is not found from the current directory (an old run folder stores it as
// given: relative to the directory the run was started from) falls back to DIR/metrics.jsonl, else is
// an InputError saying so. The throughput and memory figures are those of the last segment that
// trained a step (a finished run started again trains none and summarizes zero tokens/s).
RunRecord read_run_folder(const std::string& dir);

// The dotted config keys whose values differ between the runs (logging.run_dir and paths inside a
// run's own folder excepted: they differ by construction), sorted.
std::vector<std::string> differing_keys(const std::vector<RunRecord>& runs);

// One row per run: run, the differing keys, status, steps, train loss, validation loss, tokens/s,
// MFU, bubble, hidden DP communication. The table is aligned text with "-" for absent values; the CSV
// has the same columns, absent values empty, numbers at full precision.
std::string format_run_report(const std::vector<RunRecord>& runs, bool csv);

}  // namespace lattice
