// Stream and Event on the CPU: work runs inline, so recording stamps the host clock and every wait
// is already satisfied. The CUDA backend maps these onto cudaStream_t / cudaEvent_t.
#include "kernels/stream.h"

#include "kernels/error.h"

namespace lattice {

void Event::record(const Stream& stream) {
  LATTICE_CHECK(stream.device() == Device::kCpu, "Event::record: the {} backend is not built",
                device_name(stream.device()));
  device_ = stream.device();
  recorded_ = true;
  host_time_ = std::chrono::steady_clock::now();
}

bool Event::query() const { return true; }

void Event::synchronize() const {}

double Event::seconds_since(const Event& start) const {
  LATTICE_CHECK(recorded_ && start.recorded_, "Event::seconds_since: both events must be recorded");
  LATTICE_CHECK(device_ == start.device_, "Event::seconds_since: events of two devices ({}, {})",
                device_name(start.device_), device_name(device_));
  return std::chrono::duration<double>(host_time_ - start.host_time_).count();
}

void Stream::wait(const Event& event) const {
  LATTICE_CHECK(!event.recorded() || event.device() == device_, "Stream::wait: a {} stream cannot wait for a {} event",
                device_name(device_), device_name(event.device()));
}

void Stream::synchronize() const {}

Event Stream::record() const {
  Event event;
  event.record(*this);
  return event;
}

}  // namespace lattice
