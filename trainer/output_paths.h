// Every path a training run writes (checkpoint.dir, --export, logging.metrics_file,
// logging.tensorboard_dir, logging.trace_file) is checked before the model is built, not at first use.
#pragma once

#include <string>

#include "trainer/config.h"

namespace lattice {

// What this rank will write: checkpoint.dir (every rank writes a shard), on a GPU
// training.gemm_autotune_dir (every rank its own file), its own logging.trace_file,
// and on rank 0 the --export directory (`export_dir`), logging.tensorboard_dir and
// logging.metrics_file. Missing directories are created; each directory gets a probe file created,
// written and removed; an existing metrics file must open for appending (unchanged). InputError
// naming the field, the path and the system's reason otherwise. First, on every rank: an InputError
// when the --export directory is the run folder (logging.run_dir), however spelled.
void check_output_paths(const Config& config, const std::string& export_dir, int rank);

}  // namespace lattice
