// logging.run_dir at the start of a run: rank 0 creates the folder, copies its log lines (errors
// included) to RUN_DIR/log.txt and writes the resolved config to RUN_DIR/config.json.
#pragma once

#include "trainer/config.h"

namespace lattice {

// Does nothing without logging.run_dir or on ranks other than 0. log.txt is appended to, so a
// resumed run continues it. config.json is written here only when the folder has none yet (a run
// refused before it starts still leaves a folder `lattice report` reads as failed); an existing one
// is replaced by write_run_config once the run is accepted. An InputError naming logging.run_dir and
// the path when the folder or a file cannot be written.
void open_run_dir(const Config& config, int rank);

// Replaces RUN_DIR/config.json (the JSON `lattice validate` prints, with every path absolute and
// run_dir's default output paths left empty, so that a copy reused with another run_dir writes
// there) atomically: CONFIG.tmp,
// then rename. Called after the checkpoint's resume checks, so that a refused resume leaves the
// config.json of the run it refused to continue as it was. Nothing without logging.run_dir or on
// ranks other than 0.
void write_run_config(const Config& config, int rank);

}  // namespace lattice
