// The layout's schedule through the simulator (parallel/schedule_simulator.h).
#include "trainer/schedule_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/error.h"
#include "parallel/schedule.h"
#include "parallel/schedule_simulator.h"

namespace lattice {

ScheduleReport simulate_layout_schedule(const ParallelLayout& L) {
  const int m = static_cast<int>(L.micro_batches);
  const SimulationResult sim =
      simulate_schedules(make_all_schedules(L.schedule, L.pipeline, L.virtual_stages, m), L.virtual_stages, m);
  LATTICE_CHECK(sim.ok(), "the {} schedule (p {}, v {}, m {}) does not complete in the simulator:\n{}",
                schedule_kind_name(L.schedule), L.pipeline, L.virtual_stages, m, sim.error_text());
  return {sim.bubble_fraction, sim.peak_inflight};
}

std::string format_schedule_report(const ScheduleReport& r) {
  return fmt::format("  simulated schedule (backward = 2 × forward, free communication): completes on every pp rank; "
                     "bubble {:.1f}%; (micro-batch, chunk) activations in flight per pp rank [{}]\n",
                     100 * r.bubble, fmt::join(r.peak_inflight, ", "));
}

}  // namespace lattice
