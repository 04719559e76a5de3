// Runs all pipeline ranks' action lists together without compute, in simulated time, and proves
// (or refutes) that they complete: matched sends/receives, no deadlock, forward before backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/schedule.h"

namespace lattice {

struct SimulatorOptions {
  // Cost of a whole pipeline stage's forward/backward on one micro-batch; a chunk of a rank with
  // v chunks costs forward_cost / v and backward_cost / v (the textbook model).
  double forward_cost = 1.0;
  double backward_cost = 2.0;
  // Per-chunk costs of one micro-batch, [pp rank][chunk] (p × v entries), in place of forward_cost / v
  // and backward_cost / v when given: stages of unequal cost, such as the last one with the loss head.
  std::vector<std::vector<double>> chunk_forward_cost, chunk_backward_cost;
  // Time from a send until its message can be received (0: free communication).
  double p2p_latency = 0.0;
  // The lists hold forwards only (make_forward_only_schedule): a backward that never runs is fine.
  bool forward_only = false;
};

struct TimedAction {
  Action action;
  double start = 0;  // when it began (for a receive: when it was posted)
  double end = 0;    // when it finished (for a receive: when the message arrived)
};

struct SimulationResult {
  bool completed = false;  // every rank ran its whole list
  bool deadlock = false;   // ranks stuck waiting on each other in a cycle
  // Every problem found, in words: deadlock cycles, receives without a send, sends nobody
  // received, a forward without its input, a backward before its forward, missing/duplicate
  // compute, wrong peers, out-of-range fields.
  std::vector<std::string> errors;
  double makespan = 0;         // latest finishing time over all ranks
  double bubble_fraction = 0;  // 1 - sum(busy) / (p · makespan)
  std::vector<double> busy;    // per rank: time spent in Forward/Backward
  // Per rank: most (micro-batch, chunk) pairs forwarded and not yet backwarded at once.
  std::vector<int64_t> peak_inflight;
  std::vector<std::vector<TimedAction>> timeline;  // per rank, the actions it ran, in order

  bool ok() const { return completed && !deadlock && errors.empty(); }
  std::string error_text() const;  // errors joined by newlines ("" when ok)
};

// Runs schedules[r] as pp rank r (p = schedules.size()), each model with v chunks and m
// micro-batches. Sends never block; a receive blocks until the send with the same (activation or
// gradient, micro-batch, destination virtual stage) has happened (+ p2p_latency). When no rank
// can progress and some have not finished, the run stops and the waits are reported: a cycle as
// a deadlock, a receive whose send appears nowhere as unmatched.
SimulationResult simulate_schedules(const std::vector<std::vector<Action>>& schedules, int v, int m,
                                    const SimulatorOptions& options = {});

// An ASCII Gantt chart of a simulated run, one row per rank, one cell per `unit` of time (default:
// the smaller chunk cost). Cells read F<mb> / B<mb> (with the chunk, F<chunk>.<mb>, when v > 1);
// '.' is idle.
std::string render_timeline(const SimulationResult& result, int v, double unit = 0,
                            const SimulatorOptions& options = {});

}  // namespace lattice
