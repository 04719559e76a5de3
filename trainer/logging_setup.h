// spdlog set-up: one stderr logger (coloured only on a terminal) with a time stamp; with several
// ranks, the rank and its grid coordinates on every line.
#pragma once

namespace lattice {

// One process: "[12:00:00] [info] message", info and above, on stderr. Call first in main().
void setup_logging();

// One rank of a parallel job: "[12:00:00] [rank 5 1/1/0] [warning] message" (tp/pp/dp
// coordinates); rank 0 logs info and above, the other ranks warnings and above.
void setup_logging(int rank, int tp_rank, int pp_rank, int dp_rank);

}  // namespace lattice
