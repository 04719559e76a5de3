// `lattice report --plot FILE.png`: the runs' loss curves and throughput drawn by tools/plot_runs.py
// (matplotlib), the one plotting script, run as a child process.
#pragma once

#include <string>
#include <vector>

namespace lattice {

// Runs `python3 plot_runs.py --output png run_dirs...`. The script is looked up as
// $LATTICE_TOOLS_DIR/plot_runs.py, then in the binary's Bazel runfiles, then as tools/plot_runs.py
// under the working directory (a checkout); not found is an InputError saying where it looked. A
// script that fails (matplotlib missing, a folder it cannot read) is a lattice::Error with its exit
// status; its own message is on stderr before it.
void plot_runs(const std::vector<std::string>& run_dirs, const std::string& png);

}  // namespace lattice
