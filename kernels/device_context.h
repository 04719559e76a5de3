// DeviceContext: what one device's work needs — its backend, its compute stream (later the
// cuBLASLt/cuDNN handles and workspaces) — and the one way to allocate and copy tensors there.
#pragma once

#include "kernels/backend.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"

namespace lattice {

// Owns its state, no globals: a CPU context is cheap to make where one is needed. Allocation and
// copies are ordered on stream(). Making a context for a device whose backend is not in this
// binary is a lattice::Error.
class DeviceContext {
 public:
  explicit DeviceContext(Device device = Device::kCpu);
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  Device device() const { return backend_->device; }
  const Backend& backend() const { return *backend_; }
  const Stream& stream() const { return stream_; }

  // A tensor on this device. Uninitialized memory: use zeros() or ops::fill when it must be set.
  Tensor empty(const Shape& shape, DType dtype = DType::kF32) const;
  Tensor zeros(const Shape& shape, DType dtype = DType::kF32) const;

  // Explicit host <-> device copies between a host tensor and a tensor on this device, of equal
  // dtype and element count. copy_to_host returns once host_dst holds the data, copy_from_host
  // once host_src may be reused. The GPU backend stages pageable host memory through pinned
  // buffers (an async copy from pageable memory is synchronous anyway); buffers copied every step
  // should be pinned by their owner.
  void copy_from_host(const Tensor& host_src, Tensor& dst) const;
  void copy_to_host(const Tensor& src, Tensor& host_dst) const;
  // A host tensor in page-locked memory (CPU: ordinary memory), the source copy_from_pinned needs.
  Tensor pinned_empty(const Shape& shape, DType dtype = DType::kF32) const;
  // Enqueues pinned_src (from pinned_empty) -> dst on stream() and returns at once, so the host
  // runs ahead of the device: pinned_src must stay unchanged until an event recorded on stream()
  // after this call has completed (CPU: copied before it returns).
  void copy_from_pinned(const Tensor& pinned_src, Tensor& dst) const;
  // A copy of a host tensor on this device, and of a tensor of this device on the host.
  Tensor to_device(const Tensor& host) const;
  Tensor to_host(const Tensor& t) const;

 private:
  const Backend* backend_;
  Stream stream_;
};

// The host's context: CPU memory every process has, for what lives on the host whatever the
// training device (a whole-model copy gathered for export, checkpoint tools, tests).
const DeviceContext& host_context();

}  // namespace lattice
