// `lattice bench`: trains the configured model for a few steps on synthetic tokens and prints
// tokens/s and achieved FLOP/s of the whole step next to this machine's single-GEMM peak,
// measured in the same run.
#pragma once

#include <cstdint>

#include "trainer/config.h"

namespace lattice {

int run_benchmark(Config config, int64_t steps);

}  // namespace lattice
