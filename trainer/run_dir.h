// logging.run_dir at the start of a run: rank 0 creates the folder, writes the resolved config to
// RUN_DIR/config.json and copies its log lines (errors included) to RUN_DIR/log.txt.
#pragma once

#include "trainer/config.h"

namespace lattice {

// Does nothing without logging.run_dir or on ranks other than 0. config.json is replaced (the same
// JSON `lattice validate` prints); log.txt is appended to, so a resumed run continues it. An
// InputError naming logging.run_dir and the path when the folder or a file cannot be written.
void open_run_dir(const Config& config, int rank);

}  // namespace lattice
