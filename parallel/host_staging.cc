// HostStaging: copies through the device's backend table, which orders them after the work
// already enqueued on the device and returns once the destination holds the data.
#include "parallel/host_staging.h"

#include "kernels/backend.h"

namespace lattice {

namespace {

Tensor host_copy(const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  if (t.bytes() > 0) {
    backend_for("HostStaging", t.device()).copy_to_host(t.raw(), host.raw(), static_cast<int64_t>(t.bytes()));
  }
  return host;
}

}  // namespace

Tensor HostStaging::input(const Tensor& t) {
  if (t.device() == Device::kCpu) return t;
  return host_copy(t);
}

Tensor HostStaging::output(const Tensor& t, bool copy_in) {
  if (t.device() == Device::kCpu) return t;
  Tensor host = copy_in ? host_copy(t) : Tensor::empty(t.shape(), t.dtype());
  outputs_.emplace_back(host, t);
  return host;
}

void HostStaging::finish() {
  auto outputs = std::move(outputs_);
  outputs_.clear();
  for (const auto& [host, device] : outputs) {
    if (device.bytes() == 0) continue;
    backend_for("HostStaging", device.device())
        .copy_from_host(host.raw(), device.raw(), static_cast<int64_t>(device.bytes()));
  }
}

}  // namespace lattice
