// DeviceTimeSum: the device time of intervals between pairs of events on one stream, summed when it
// is read rather than when an interval is added. Reading an event's time waits for the event, so
// work timed inside a step keeps its pairs and is read after the step's one read-back, when every
// event has completed: timing adds no host synchronization to the step (CPU events: host times).
#pragma once

#include <utility>
#include <vector>

#include "kernels/stream.h"

namespace lattice {

class DeviceTimeSum {
 public:
  void add(const Event& start, const Event& end) { intervals_.emplace_back(start, end); }
  // The sum of end.seconds_since(start) over the intervals (0 with none); waits for events still
  // in flight.
  double seconds() const;
  bool empty() const { return intervals_.empty(); }

 private:
  std::vector<std::pair<Event, Event>> intervals_;
};

}  // namespace lattice
