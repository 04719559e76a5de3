// `lattice validate`'s schedule check: the layout's pipeline schedule run for every pp rank in the
// schedule simulator (no compute), so a config learns its simulated bubble and in-flight activations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config.h"

namespace lattice {

// What simulating every pp rank's action list showed, in the textbook cost model (a stage's
// backward costs twice its forward, free communication).
struct ScheduleReport {
  double bubble = 0;                    // simulated idle share of p · makespan
  std::vector<int64_t> peak_inflight;   // per pp rank: most (micro-batch, chunk) pairs held at once
};

// Simulates the layout's schedule; a schedule that does not complete (deadlock, unmatched
// transfers) is an internal error naming what the simulator found.
ScheduleReport simulate_layout_schedule(const ParallelLayout& layout);

// "  simulated schedule: completes on every pp rank; bubble 20.0%; activations in flight per pp rank [2, 1]\n"
std::string format_schedule_report(const ScheduleReport& report);

}  // namespace lattice
