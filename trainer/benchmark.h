// `lattice bench`: trains the configured model for a few steps on synthetic tokens and prints
// tokens/s and achieved FLOP/s of the whole step next to this machine's single-GEMM peak,
// measured in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config.h"

namespace lattice {

// The fewest --steps: a warm-up step and two timed ones, the figures being medians and means over
// the timed steps.
inline constexpr int64_t kMinBenchSteps = 3;

// A scratch measurement of one process: the config's model, batch, precision and device are timed,
// but nothing of its run is read or written — no logging.run_dir (config.json, log.txt), metrics,
// TensorBoard or trace file, no checkpoint loaded or saved, training.gemm_autotune_dir replaced by a
// scratch directory — and nothing stops it early (exit_interval, exit_duration_mins) or runs
// between its steps (sample_interval, evaluation). `trace_file` (empty = none): a Chrome trace of
// the benchmark's steps, when the user asked for one on bench's own command line.
// Throws an InputError under a launcher that started more than one task (mpirun -np 2), or for
// fewer than kMinBenchSteps steps; an Error, printing nothing, when fewer than kMinBenchSteps - 1
// steps were timed (a stop request) or a time came out as zero.
// profile_ops: also the device time of every op of the timed steps (trainer/op_profile_report.h).
int run_benchmark(Config config, int64_t steps, bool profile_ops = false, const std::string& trace_file = "");

}  // namespace lattice
