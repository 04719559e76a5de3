// The process's CUDA device, compute stream, memory pool and pinned staging buffers.
#include "kernels/cuda/runtime.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include <fmt/format.h>

#include <cuda_profiler_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/error.h"
#include "kernels/no_cuda_device.h"

namespace lattice::cuda {

namespace {

struct State {
  std::once_flag once;
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
};

State& state() {
  static State s;
  return s;
}

// Sets up the device (device 0 unless select_device chose), its stream and pool, once.
void ensure_started(int chosen = 0) {
  State& s = state();
  std::call_once(s.once, [&] {
    visible_device_count();
    LATTICE_CUDA_CHECK(cudaSetDevice(chosen));
    s.device = chosen;
    LATTICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    LATTICE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&s.pool, chosen));
    // Keep freed memory in the pool: the default threshold (0) returns it to the driver at every
    // synchronization, and each step would allocate from the driver again.
    uint64_t keep = std::numeric_limits<uint64_t>::max();
    LATTICE_CUDA_CHECK(cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  });
}

// A pinned host buffer that grows to the largest copy asked of it; one per direction, guarded
// because the prefetch thread and the checkpoint writer may copy while the step runs.
class PinnedStage {
 public:
  ~PinnedStage() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  std::mutex& mutex() { return mutex_; }
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      if (data_ != nullptr) LATTICE_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      LATTICE_CUDA_CHECK(cudaMallocHost(&data_, bytes));
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  std::mutex mutex_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Copies of more than this go through the stage in pieces of this size.
constexpr size_t kStageBytes = size_t{64} << 20;

PinnedStage& stage_to_host() {
  static PinnedStage s;
  return s;
}
PinnedStage& stage_from_host() {
  static PinnedStage s;
  return s;
}

// The selected device's properties (the device started if it was not).
cudaDeviceProp selected_properties() {
  ensure_started();
  cudaDeviceProp prop{};
  LATTICE_CUDA_CHECK(cudaGetDeviceProperties(&prop, state().device));
  return prop;
}

}  // namespace

int visible_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    int driver = 0, runtime = 0;  // the driver's stays 0 where there is no driver
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    throw InputError(
        no_cuda_device_message(err != cudaSuccess ? cudaGetErrorString(err) : "0 devices", driver, runtime));
  }
  return count;
}

std::string select_device(int local_rank, int local_size) {
  const int count = visible_device_count();
  const int chosen = local_rank % count;
  ensure_started(chosen);
  LATTICE_CHECK(state().device == chosen, "select_device: the CUDA device was already set to {}", state().device);
  const cudaDeviceProp prop = selected_properties();
  int driver = 0, runtime = 0;  // major·1000 + minor·10
  LATTICE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  LATTICE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return fmt::format("cuda: local rank {} of {} uses visible GPU {} of {} ({}, {:.1f} GiB, sm_{}{}); driver's CUDA "
                     "{}, runtime {}",
                     local_rank, local_size, chosen, count, prop.name, prop.totalGlobalMem / double(1 << 30),
                     prop.major, prop.minor, cuda_version_text(driver), cuda_version_text(runtime));
}

std::array<uint8_t, 16> device_uuid() {
  const cudaDeviceProp prop = selected_properties();
  std::array<uint8_t, 16> uuid{};
  static_assert(sizeof prop.uuid.bytes == uuid.size());
  std::memcpy(uuid.data(), prop.uuid.bytes, uuid.size());
  return uuid;
}

std::string device_model() { return selected_properties().name; }

std::string device_identity() {
  const cudaDeviceProp prop = selected_properties();
  return fmt::format("{}, sm_{}{}, {} SMs", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
}

int device_compute_capability() {
  const cudaDeviceProp prop = selected_properties();
  return prop.major * 10 + prop.minor;
}

size_t device_memory_bytes() { return selected_properties().totalGlobalMem; }

cudaStream_t compute_stream() {
  ensure_started();
  // The current device is per host thread: the prefetch and checkpoint threads copy too.
  thread_local bool device_set = false;
  if (!device_set) {
    LATTICE_CUDA_CHECK(cudaSetDevice(state().device));
    device_set = true;
  }
  return state().stream;
}

void* allocate(size_t bytes) {
  ensure_started();
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  const cudaError_t err = cudaMallocAsync(&ptr, bytes, compute_stream());
  if (err != cudaSuccess) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw Error(fmt::format("out of GPU memory: allocating {:.2f} GiB failed ({}); {:.2f} GiB of {:.2f} GiB are free, "
                            "{:.2f} GiB held by this process's pool. Lower training.micro_batch_size, raise "
                            "parallel.tensor/pipeline, or set parallel.distributed_optimizer",
                            bytes / double(1 << 30), cudaGetErrorString(err), free_bytes / double(1 << 30),
                            total / double(1 << 30), pool_used_bytes() / double(1 << 30)));
  }
  return ptr;
}

void release(void* ptr) {
  if (ptr == nullptr) return;
  // Never throw from a Storage destructor: a failure here means the context is already broken,
  // and the next checked call reports it.
  cudaFreeAsync(ptr, state().stream);
}

size_t pool_used_bytes() {
  ensure_started();
  uint64_t used = 0;
  LATTICE_CUDA_CHECK(cudaMemPoolGetAttribute(state().pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return used;
}

size_t pool_peak_bytes() {
  ensure_started();
  uint64_t peak = 0;
  LATTICE_CUDA_CHECK(cudaMemPoolGetAttribute(state().pool, cudaMemPoolAttrUsedMemHigh, &peak));
  return peak;
}

size_t used_outside_pool_bytes() {
  ensure_started();
  size_t free_bytes = 0, total = 0;
  LATTICE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  uint64_t reserved = 0;  // what the pool holds from the driver, in use or kept for reuse
  LATTICE_CUDA_CHECK(cudaMemPoolGetAttribute(state().pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  const size_t used = total - free_bytes;
  return used > reserved ? used - reserved : 0;
}

void copy_to_host(const void* device_src, void* host_dst, int64_t bytes) {
  if (bytes <= 0) return;
  PinnedStage& stage = stage_to_host();
  std::lock_guard<std::mutex> lock(stage.mutex());
  auto* staged = static_cast<char*>(stage.get(std::min<size_t>(bytes, kStageBytes)));
  for (int64_t done = 0; done < bytes;) {
    const size_t n = std::min<size_t>(bytes - done, kStageBytes);
    LATTICE_CUDA_CHECK(cudaMemcpyAsync(staged, static_cast<const char*>(device_src) + done, n,
                                       cudaMemcpyDeviceToHost, compute_stream()));
    LATTICE_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    std::memcpy(static_cast<char*>(host_dst) + done, staged, n);
    done += static_cast<int64_t>(n);
  }
}

void copy_from_host(const void* host_src, void* device_dst, int64_t bytes) {
  if (bytes <= 0) return;
  PinnedStage& stage = stage_from_host();
  std::lock_guard<std::mutex> lock(stage.mutex());
  auto* staged = static_cast<char*>(stage.get(std::min<size_t>(bytes, kStageBytes)));
  for (int64_t done = 0; done < bytes;) {
    const size_t n = std::min<size_t>(bytes - done, kStageBytes);
    std::memcpy(staged, static_cast<const char*>(host_src) + done, n);
    LATTICE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(device_dst) + done, staged, n, cudaMemcpyHostToDevice,
                                       compute_stream()));
    // The stage is reused by the next piece (and the next call): wait until the device read it.
    LATTICE_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    done += static_cast<int64_t>(n);
  }
}

cudaStream_t copy_stream() {
  (void)compute_stream();  // starts the runtime and sets this thread's device
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    LATTICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

void* allocate_pinned(size_t bytes) {
  (void)compute_stream();  // starts the runtime on the process's device first
  void* ptr = nullptr;
  // Portable: pinned for every context, whichever thread or device allocates it.
  LATTICE_CUDA_CHECK(cudaHostAlloc(&ptr, std::max<size_t>(bytes, 1), cudaHostAllocPortable));
  return ptr;
}

void free_pinned(void* ptr) { cudaFreeHost(ptr); }  // a destructor's path: never throws

void copy_from_pinned(const void* pinned_src, void* device_dst, int64_t bytes) {
  if (bytes <= 0) return;
  LATTICE_CUDA_CHECK(cudaMemcpyAsync(device_dst, pinned_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                     compute_stream()));
}

void synchronize() { LATTICE_CUDA_CHECK(cudaStreamSynchronize(compute_stream())); }

void set_profiler_capture(bool on) {
  if (on) {
    LATTICE_CUDA_CHECK(cudaProfilerStart());
    return;
  }
  LATTICE_CUDA_CHECK(cudaDeviceSynchronize());
  LATTICE_CUDA_CHECK(cudaProfilerStop());
}

std::shared_ptr<void> record_on(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  LATTICE_CUDA_CHECK(cudaEventCreate(&event));
  LATTICE_CUDA_CHECK(cudaEventRecord(event, stream));
  return std::shared_ptr<void>(event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
}

}  // namespace lattice::cuda
