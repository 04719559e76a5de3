// Stream and Event: on the CPU work runs inline, so recording stamps the host clock and every wait
// is already satisfied; a device's events come from its backend (kernels/backend.h).
#include "kernels/stream.h"

#include "kernels/backend.h"
#include "kernels/error.h"

namespace lattice {

void Event::record(const Stream& stream) {
  std::shared_ptr<void> device_event;
  if (stream.device() != Device::kCpu) {
    const Backend& backend = backend_for("Event::record", stream.device());
    LATTICE_CHECK(backend.record_event != nullptr, "Event::record: the {} backend has no events",
                  device_name(stream.device()));
    device_event = backend.record_event();
  }
  device_ = stream.device();
  recorded_ = true;
  host_time_ = std::chrono::steady_clock::now();
  device_event_ = std::move(device_event);
}

Event Event::adopt(Device device, std::shared_ptr<void> device_event) {
  Event event;
  event.device_ = device;
  event.recorded_ = true;
  event.host_time_ = std::chrono::steady_clock::now();
  event.device_event_ = std::move(device_event);
  return event;
}

bool Event::query() const {
  if (device_event_ == nullptr) return true;
  return backend_for("Event::query", device_).event_query(device_event_.get());
}

void Event::synchronize() const {
  if (device_event_ != nullptr) backend_for("Event::synchronize", device_).event_synchronize(device_event_.get());
}

double Event::seconds_since(const Event& start) const {
  LATTICE_CHECK(recorded_ && start.recorded_, "Event::seconds_since: both events must be recorded");
  LATTICE_CHECK(device_ == start.device_, "Event::seconds_since: events of two devices ({}, {})",
                device_name(start.device_), device_name(device_));
  if (device_event_ != nullptr && start.device_event_ != nullptr) {
    return backend_for("Event::seconds_since", device_).event_seconds(start.device_event_.get(), device_event_.get());
  }
  return std::chrono::duration<double>(host_time_ - start.host_time_).count();
}

void Stream::wait(const Event& event) const {
  // A host (CPU) event marks work the host has already finished, so any stream may "wait" for it
  // (MPI operations complete on the host; a GPU stream then orders nothing extra). A device event
  // on another device's stream would need that device's cooperation: refused.
  LATTICE_CHECK(!event.recorded() || event.device() == device_ || event.device() == Device::kCpu,
                "Stream::wait: a {} stream cannot wait for a {} event", device_name(device_),
                device_name(event.device()));
  if (event.device_event_ == nullptr || device_ == Device::kCpu) return;
  const Backend& backend = backend_for("Stream::wait", device_);
  if (backend.compute_wait != nullptr) backend.compute_wait(event.device_event_.get());
}

void Stream::synchronize() const {
  if (device_ == Device::kCpu) return;
  const Backend& backend = backend_for("Stream::synchronize", device_);
  if (backend.synchronize != nullptr) backend.synchronize();
}

Event Stream::record() const {
  Event event;
  event.record(*this);
  return event;
}

}  // namespace lattice
