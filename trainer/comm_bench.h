// `lattice bench --comm`: times this job's all-reduce and point-to-point transfers at sizes from 4 KiB
// to 64 MiB and fits α (latency per ring step / per message) and β (bandwidth), the figures
// `lattice plan --gpu FILE` takes for the links between the launched ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace lattice {

struct CommBenchPoint {
  std::string op;  // "all_reduce" or "p2p" (one way, from a ping-pong between ranks 0 and 1)
  int64_t bytes = 0;
  double seconds = 0;  // median over the timed repetitions
};

struct CommBenchResult {
  int ranks = 0;
  std::vector<CommBenchPoint> points;
  // The ring model t = 2(n-1)·α + 2(n-1)/n · bytes / β for all-reduce, and t = α + bytes / β for one p2p
  // message: α by least squares of the relative error over the small messages, β the rate of the
  // large ones (comm_bench.cc).
  double all_reduce_alpha = 0, all_reduce_beta = 0;
  double p2p_alpha = 0, p2p_beta = 0;
};

// Collective over `world` (every rank calls it); rank 0's result holds the timings.
CommBenchResult bench_comm(Communicator& world);

// The table of timings, the fitted α and β, and the lines of a `lattice plan --gpu FILE` spec.
std::string format_comm_bench(const CommBenchResult& result);

}  // namespace lattice
