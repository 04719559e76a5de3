// Stream and Event: the order of device work. Ops are enqueued on a stream; an event marks a point
// in a stream that another stream (device-side) or the host can wait for. On the CPU every op runs
// inline when it is called, so a CPU stream is always drained and a CPU event complete once recorded.
#pragma once

#include <chrono>
#include <memory>

#include "kernels/tensor.h"

namespace lattice {

class Stream;

// A point in a stream. Copyable (copies name the same point). A default-constructed event was never
// recorded: it is complete and has no time.
class Event {
 public:
  Event() = default;

  // Marks the point `stream` has reached: all work enqueued on it so far.
  void record(const Stream& stream);
  // An event a device's backend recorded on one of its other streams (Backend::copy_to_pinned_async).
  static Event adopt(Device device, std::shared_ptr<void> device_event);
  bool recorded() const { return recorded_; }
  Device device() const { return device_; }
  // Whether the work before the point has completed (CPU: always).
  bool query() const;
  // The host blocks until the work before the point has completed (CPU: returns at once).
  void synchronize() const;
  // Seconds from `start` to this event, both recorded on one device: on a GPU the time the device
  // took to execute the work between them, not the time the host took to launch it.
  double seconds_since(const Event& start) const;
  // When the host recorded the event (CPU: when the work before it finished; a device: when the
  // host enqueued the record). Tracer anchors use it, so a CPU span's times share one clock read.
  std::chrono::steady_clock::time_point host_time() const { return host_time_; }

 private:
  friend class Stream;  // Stream::wait hands the device event to the backend
  Device device_ = Device::kCpu;
  bool recorded_ = false;
  std::chrono::steady_clock::time_point host_time_;  // CPU: when recorded = when the work finished
  std::shared_ptr<void> device_event_;                // a device's event (its backend's record_event)
};

// An ordered queue of device work. The CPU stream runs everything inline. A CUDA stream is the
// backend's compute stream (one GPU and one compute stream per process), so waits between two
// streams of one device are already ordered.
class Stream {
 public:
  explicit Stream(Device device = Device::kCpu) : device_(device) {}

  Device device() const { return device_; }
  // Work enqueued on this stream from now on starts after `event` completed: a device-side wait,
  // the host does not block (CPU: the event is complete already). A CPU event (host work, e.g. an
  // MPI operation the host completed) is complete once recorded, so any stream may wait for it. An
  // event of the device's copy stream is waited for by the device (Backend::compute_wait).
  void wait(const Event& event) const;
  // The host blocks until all work enqueued on this stream has completed (CPU: at once).
  void synchronize() const;
  // An event recorded at this stream's current point.
  Event record() const;

 private:
  Device device_;
};

}  // namespace lattice
