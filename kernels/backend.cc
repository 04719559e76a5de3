// The device -> backend registry: the CPU table from the start, others as their builds register.
#include "kernels/backend.h"

#include <array>
#include <atomic>

#include <fmt/format.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"

namespace lattice {

namespace {

// Indexed by Device. Atomic: a table registered (at startup, or swapped by a test) may be read
// by ops running on another thread.
std::array<std::atomic<const Backend*>, 2>& registry() {
  static std::array<std::atomic<const Backend*>, 2> slots{&cpu::backend(), nullptr};
  return slots;
}

}  // namespace

const Backend& backend_for(const char* op, Device device) {
  const Backend* b = registry()[static_cast<size_t>(device)].load(std::memory_order_acquire);
  if (b == nullptr) {
    throw Error(fmt::format("{}: no {} backend is built into this binary (the CUDA backend comes with "
                            "--config=cuda)",
                            op, device_name(device)));
  }
  return *b;
}

const Backend& backend_for(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;  // null: an operand the op does not take
    if (first == nullptr) {
      first = t;
    } else if (t->device() != first->device()) {
      throw Error(fmt::format("{}: tensors on two devices: {} and {} (copy explicitly with a DeviceContext)", op,
                              first->describe(), t->describe()));
    }
  }
  return backend_for(op, first == nullptr ? Device::kCpu : first->device());
}

bool has_backend(Device device) {
  return registry()[static_cast<size_t>(device)].load(std::memory_order_acquire) != nullptr;
}

const Backend* set_backend(Device device, const Backend* backend) {
  LATTICE_CHECK(backend == nullptr || backend->device == device, "set_backend: a {} table registered for {}",
                device_name(backend->device), device_name(device));
  return registry()[static_cast<size_t>(device)].exchange(backend, std::memory_order_acq_rel);
}

}  // namespace lattice
