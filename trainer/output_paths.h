// Every path a training run writes (checkpoint.dir, --export, logging.metrics_file,
// logging.trace_file) is checked before the model is built, not when it is first used.
#pragma once

#include <string>

#include "trainer/config.h"

namespace lattice {

// Creates `dir` and its missing parents, then creates, writes and removes a probe file in it.
// InputError naming `field`, the path and the system's reason when any of that fails.
void check_writable_directory(const std::string& field, const std::string& dir);

// The directory of `file` as above; an existing `file` must open for appending (it is not changed).
void check_writable_file(const std::string& field, const std::string& file);

// What this rank will write: checkpoint.dir (every rank writes a shard), its own logging.trace_file,
// and on rank 0 the --export directory (`export_dir`) and logging.metrics_file.
void check_output_paths(const Config& config, const std::string& export_dir, int rank);

}  // namespace lattice
