// Every path a training run writes (checkpoint.dir, --export, logging.metrics_file,
// logging.tensorboard_dir, logging.trace_file) is checked before the model is built, not at first use.
#pragma once

#include <string>

#include "trainer/config.h"

namespace lattice {

// kProbe (train): missing directories are created; each directory gets a probe file created, written
// and removed; an existing metrics file must open for appending (unchanged). kInspect (validate):
// nothing is written — each directory, or its nearest existing ancestor, must be a directory (one
// this user cannot write in, or a metrics file it cannot append to, is only warned about: the job
// may run on other machines); logging.run_dir is checked too.
enum class OutputCheck { kProbe, kInspect };

// What this rank will write: checkpoint.dir (every rank writes a shard), on a GPU
// training.gemm_autotune_dir (every rank its own file), its own logging.trace_file,
// and on rank 0 the --export directory (`export_dir`), logging.tensorboard_dir and
// logging.metrics_file, checked as `mode` says. InputError naming the field, the path and the
// system's reason otherwise. First, on every rank: an InputError when the --export directory is the
// run folder (logging.run_dir), however spelled.
void check_output_paths(const Config& config, const std::string& export_dir, int rank,
                        OutputCheck mode = OutputCheck::kProbe);

}  // namespace lattice
