// Tensor and Storage: allocation, views and shape bookkeeping.
#include "kernels/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

const char* device_name(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "f64";
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kBF16: return 2;
    case DType::kF64: return 8;
  }
  return 0;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

size_t tensor_bytes(const Shape& shape, DType dtype) {
  for (int64_t d : shape) LATTICE_CHECK(d >= 0, "negative dimension in shape {}", shape_string(shape));
  return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
}

Storage::Storage(Device device, void* data, size_t bytes, Release release)
    : device_(device), bytes_(bytes), data_(data), release_(release) {}

namespace {

// Host storage in use and its high mark, for the end-of-run comparison with the memory plan (the
// CPU backend's peak_memory_bytes, as the CUDA pool's high mark is the GPU's).
std::atomic<int64_t> live_host_bytes{0};
std::atomic<int64_t> host_high_mark{0};

// 64-byte alignment for vector loads; never a zero-sized request.
size_t host_allocation_bytes(size_t bytes) { return bytes == 0 ? 64 : ((bytes + 63) / 64) * 64; }

void host_release(void* data) { std::free(data); }

}  // namespace

std::shared_ptr<Storage> Storage::host(size_t bytes) {
  const size_t rounded = host_allocation_bytes(bytes);
  void* data = std::aligned_alloc(64, rounded);
  if (data == nullptr) throw Error(fmt::format("out of host memory allocating {} bytes", bytes));
  const int64_t live = live_host_bytes.fetch_add(static_cast<int64_t>(rounded)) + static_cast<int64_t>(rounded);
  int64_t peak = host_high_mark.load();
  while (live > peak && !host_high_mark.compare_exchange_weak(peak, live)) {
  }
  return std::make_shared<Storage>(Device::kCpu, data, bytes, &host_release);
}

size_t Storage::host_peak_bytes() { return static_cast<size_t>(host_high_mark.load()); }

Storage::~Storage() {
  if (release_ == &host_release) live_host_bytes.fetch_sub(static_cast<int64_t>(host_allocation_bytes(bytes_)));
  release_(data_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  return over(Storage::host(tensor_bytes(shape, dtype)), shape, dtype);
}

Tensor Tensor::over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  LATTICE_CHECK(storage->bytes() == tensor_bytes(shape, dtype),
                "a storage of {} bytes cannot hold {}{}", storage->bytes(), dtype_name(dtype), shape_string(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = storage->device();
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw(), 0, t.bytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  int j = i < 0 ? r + i : i;
  LATTICE_CHECK(j >= 0 && j < r, "dim {} out of range for {}", i, describe());
  return shape_[j];
}

Tensor Tensor::view(const Shape& shape) const {
  LATTICE_CHECK(shape_numel(shape) == numel(), "cannot view {} as {}", describe(), shape_string(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_flat(int64_t begin, const Shape& shape) const {
  LATTICE_CHECK(begin >= 0 && begin + shape_numel(shape) <= numel(), "slice [{}, +{}) out of range for {}",
                begin, shape_numel(shape), describe());
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(begin) * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  LATTICE_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "rows [{}, {}) of {}", begin,
                end, describe());
  Shape s = shape_;
  s[0] = end - begin;
  return slice_flat(begin * (shape_[0] == 0 ? 0 : numel() / shape_[0]), s);
}

void* Tensor::raw() const {
  LATTICE_CHECK(defined(), "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

float* Tensor::f32() const {
  LATTICE_CHECK(dtype_ == DType::kF32, "expected f32, got {}", describe());
  return static_cast<float*>(raw());
}

int32_t* Tensor::i32() const {
  LATTICE_CHECK(dtype_ == DType::kI32, "expected i32, got {}", describe());
  return static_cast<int32_t*>(raw());
}

uint16_t* Tensor::bf16() const {
  LATTICE_CHECK(dtype_ == DType::kBF16, "expected bf16, got {}", describe());
  return static_cast<uint16_t*>(raw());
}

double* Tensor::f64() const {
  LATTICE_CHECK(dtype_ == DType::kF64, "expected f64, got {}", describe());
  return static_cast<double*>(raw());
}

std::string Tensor::describe() const {
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_string(shape_), device_name(device_));
}

}  // namespace lattice
