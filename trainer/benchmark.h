// `lattice bench`: trains the configured model for a few steps on synthetic tokens and prints
// tokens/s and achieved FLOP/s of the whole step next to this machine's single-GEMM peak,
// measured in the same run.
#pragma once

#include <cstdint>

#include "trainer/config.h"

namespace lattice {

// profile_ops: also the device time of every op of the timed steps (trainer/op_profile_report.h).
int run_benchmark(Config config, int64_t steps, bool profile_ops = false);

}  // namespace lattice
