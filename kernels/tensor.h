// Tensor: {device, dtype, shape, storage}. The one data type every layer and kernel works on.
// Storage is reference counted; views (reshape, row ranges) share it. Element work never loops
// here: it is a call into kernels/ops.h, so a CUDA backend slots in behind the same API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lattice {

enum class Device { kCpu, kCuda };
// kBF16: bfloat16 stored as its 16 raw bits (the top half of an f32); see kernels/bf16.h.
// kF64: the double sums that come back to the host (trainer/step_readback.h).
enum class DType { kF32, kI32, kBF16, kF64 };

const char* device_name(Device device);
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);
// Bytes of a tensor of `shape` and `dtype`; a negative dimension is an error.
size_t tensor_bytes(const Shape& shape, DType dtype);

// Owns one allocation on one device and hands it back to the allocator that made it.
class Storage {
 public:
  using Release = void (*)(void* data);
  // Adopts `data` (`bytes` long, on `device`); the destructor calls release(data).
  Storage(Device device, void* data, size_t bytes, Release release);
  // Host memory, 64-byte aligned for vector loads.
  static std::shared_ptr<Storage> host(size_t bytes);
  // The most host storage (64-byte rounded) held at once so far by this process.
  static size_t host_peak_bytes();
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return device_; }
  size_t bytes() const { return bytes_; }
  void* data() const { return data_; }

 private:
  Device device_;
  size_t bytes_;
  void* data_;
  Release release_;
};

class Tensor {
 public:
  Tensor() = default;

  // HOST tensors (files, staging, values the host computes). Uninitialized memory: callers that
  // need zeros call zeros() or kernels::fill. Tensors the model computes on come from a
  // DeviceContext (kernels/device_context.h), so no tensor lands on a device by accident.
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32);
  // A tensor over all of `storage` (which must hold exactly shape × dtype bytes), on its device.
  static Tensor over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  // Same storage, new shape with the same element count.
  Tensor view(const Shape& shape) const;
  // Elements [begin, begin + count) of the flattened tensor, viewed with `shape`.
  Tensor slice_flat(int64_t begin, const Shape& shape) const;
  // Rows [begin, end) along dim 0.
  Tensor rows(int64_t begin, int64_t end) const;

  // Raw device pointer (host pointer for CPU tensors); checks the dtype.
  float* f32() const;
  int32_t* i32() const;
  uint16_t* bf16() const;  // raw bfloat16 bits
  double* f64() const;
  void* raw() const;

  std::string describe() const;  // "f32[4, 64, 768] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
};

}  // namespace lattice
