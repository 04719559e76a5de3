// DeviceContext: allocation through the device's backend and checked host <-> device copies.
#include "kernels/device_context.h"

#include "kernels/error.h"

namespace lattice {

namespace {

void check_pair(const char* op, const Tensor& host, const Tensor& device_tensor, Device device) {
  LATTICE_CHECK(host.defined() && device_tensor.defined(), "{}: undefined tensor", op);
  LATTICE_CHECK(host.device() == Device::kCpu, "{}: the host side {} is not a host tensor", op, host.describe());
  LATTICE_CHECK(device_tensor.device() == device, "{}: {} is not on this context's device ({})", op,
                device_tensor.describe(), device_name(device));
  LATTICE_CHECK(host.dtype() == device_tensor.dtype() && host.numel() == device_tensor.numel(),
                "{}: {} and {} differ in dtype or element count", op, host.describe(), device_tensor.describe());
}

}  // namespace

DeviceContext::DeviceContext(Device device)
    : backend_(&backend_for("DeviceContext", device)), stream_(device) {}

Tensor DeviceContext::empty(const Shape& shape, DType dtype) const {
  return Tensor::over(backend_->allocate(tensor_bytes(shape, dtype)), shape, dtype);
}

Tensor DeviceContext::zeros(const Shape& shape, DType dtype) const {
  Tensor t = empty(shape, dtype);
  backend_->zero(t.raw(), static_cast<int64_t>(t.bytes()));
  return t;
}

void DeviceContext::copy_from_host(const Tensor& host_src, Tensor& dst) const {
  check_pair("copy_from_host", host_src, dst, device());
  backend_->copy_from_host(host_src.raw(), dst.raw(), static_cast<int64_t>(dst.bytes()));
}

void DeviceContext::copy_to_host(const Tensor& src, Tensor& host_dst) const {
  check_pair("copy_to_host", host_dst, src, device());
  backend_->copy_to_host(src.raw(), host_dst.raw(), static_cast<int64_t>(src.bytes()));
}

Tensor DeviceContext::pinned_empty(const Shape& shape, DType dtype) const {
  return Tensor::over(backend_->allocate_pinned(tensor_bytes(shape, dtype)), shape, dtype);
}

void DeviceContext::copy_from_pinned(const Tensor& pinned_src, Tensor& dst) const {
  check_pair("copy_from_pinned", pinned_src, dst, device());
  backend_->copy_from_pinned(pinned_src.raw(), dst.raw(), static_cast<int64_t>(dst.bytes()));
}

Tensor DeviceContext::to_device(const Tensor& host) const {
  Tensor t = empty(host.shape(), host.dtype());
  copy_from_host(host, t);
  return t;
}

Tensor DeviceContext::to_host(const Tensor& t) const {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  copy_to_host(t, host);
  return host;
}

const DeviceContext& host_context() {
  static const DeviceContext host(Device::kCpu);
  return host;
}

}  // namespace lattice
