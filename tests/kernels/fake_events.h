// FakeEvents: device events for tests of what waits for what, on the CUDA stand-in (host memory
// posing as a device). Event i is the i-th recorded (from 1) and is complete once `completed`
// reaches it; a host wait for it (event_synchronize) is logged in `waited` and completes it and
// everything recorded before it (one stream: in order); from event i to event j is (j - i) ms.
// Reading the time of an event still in flight counts in `early_reads`: on a GPU that read would
// have been a host wait.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/backend_harness.h"

namespace lattice::test {

struct FakeEvents {
  static inline int recorded = 0, completed = 0, early_reads = 0;
  static inline std::vector<int> waited;

  static void reset() {
    recorded = completed = early_reads = 0;
    waited.clear();
  }
  static int id(void* event) { return *static_cast<int*>(event); }
  static std::shared_ptr<void> record() { return std::make_shared<int>(++recorded); }
  static bool query(void* event) { return id(event) <= completed; }
  static void synchronize(void* event) {
    waited.push_back(id(event));
    completed = std::max(completed, id(event));
  }
  static double seconds(void* start, void* end) {
    if (!query(start) || !query(end)) ++early_reads;
    return (id(end) - id(start)) * 1e-3;
  }

  // `base` with these events (reset first).
  static Backend device(Backend base = cuda_stand_in()) {
    reset();
    base.record_event = &record;
    base.event_query = &query;
    base.event_synchronize = &synchronize;
    base.event_seconds = &seconds;
    return base;
  }
};

}  // namespace lattice::test
