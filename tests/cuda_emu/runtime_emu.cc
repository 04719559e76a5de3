// kernels/cuda/runtime.h for the emulated CUDA backend: "device" memory is host memory, poisoned
// when allocated (all bits set: NaN as floats) so a kernel that reads what nothing wrote shows it,
// and freed in the compute stream's order, as cudaFreeAsync frees it; the copies to and from the
// host wait for the compute stream as the real ones do, the copy stream is synchronous, and the
// other streams are queues (streams.h). It has one GPU, or LATTICE_EMULATED_GPUS of them (the
// emulated NCCL's multi-rank tests: NCCL needs a GPU per rank), of which CUDA_VISIBLE_DEVICES shows
// those it lists, each with the host's memory, or LATTICE_EMULATED_GPU_MEMORY_MIB.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/cuda/runtime.h"
#include "kernels/error.h"
#include "tests/cuda_emu/device_memory.h"

namespace lattice::cuda {
namespace {

std::mutex pool_mutex;
std::unordered_map<void*, size_t>& live() {
  static std::unordered_map<void*, size_t> sizes;
  return sizes;
}
size_t used = 0, peak = 0;

// The bytes an environment variable gives in MiB, or `otherwise` when it is unset or not positive.
size_t mib_from_env(const char* name, size_t otherwise) {
  const char* mib = std::getenv(name);
  return mib != nullptr && std::atoll(mib) > 0 ? static_cast<size_t>(std::atoll(mib)) << 20 : otherwise;
}

// The machine's emulated GPUs, numbered 0 .. LATTICE_EMULATED_GPUS - 1, that this process sees: as
// CUDA does, CUDA_VISIBLE_DEVICES lists them (by number; e.g. each rank bound to its own, as Slurm's
// --gpus-per-task does), else all. Visible GPU i is the list's i-th.
std::vector<int> visible_gpus() {
  const char* count = std::getenv("LATTICE_EMULATED_GPUS");
  const int machine = count != nullptr && std::atoi(count) > 0 ? std::atoi(count) : 1;
  std::vector<int> visible;
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list == nullptr) {
    for (int gpu = 0; gpu < machine; ++gpu) visible.push_back(gpu);
    return visible;
  }
  for (const char* p = list; *p != '\0'; ++p) {  // p steps over the comma after each entry
    char* end = nullptr;
    const long gpu = std::strtol(p, &end, 10);
    if (end == p || gpu < 0 || gpu >= machine) break;  // CUDA stops at the first entry it cannot use
    visible.push_back(static_cast<int>(gpu));
    p = end;
    if (*p != ',') break;
  }
  return visible;
}

int selected_gpu = 0;  // the machine's number of this process's GPU

}  // namespace

int visible_device_count() {
  const int count = static_cast<int>(visible_gpus().size());
  if (count == 0) {
    throw InputError("no CUDA device is visible (cudaGetDeviceCount: 0 devices; the emulator's CUDA_VISIBLE_DEVICES "
                     "names none of its LATTICE_EMULATED_GPUS)");
  }
  return count;
}

std::string select_device(int local_rank, int local_size) {
  const int count = visible_device_count();
  const int chosen = local_rank % count;
  selected_gpu = visible_gpus()[static_cast<size_t>(chosen)];
  // The real runtime's wording (tests/cuda/train_gpu_test.sh prints this line).
  return fmt::format("cuda: local rank {} of {} uses visible GPU {} of {} (the CPU emulator of a GPU, tests/cuda_emu)",
                     local_rank, local_size, chosen, count);
}

// GPU n's UUID: n in its first byte.
std::array<uint8_t, 16> device_uuid() {
  std::array<uint8_t, 16> uuid{};
  uuid[0] = static_cast<uint8_t>(selected_gpu);
  return uuid;
}

std::string device_model() { return "CPU emulator of a GPU"; }
std::string device_identity() { return device_model(); }

// LATTICE_EMULATED_GPU_SM (e.g. 90), so that tests can take the paths a GPU's architecture picks;
// unset: 0, no architecture.
int device_compute_capability() {
  const char* sm = std::getenv("LATTICE_EMULATED_GPU_SM");
  return sm != nullptr ? std::atoi(sm) : 0;
}

// The host's memory, or LATTICE_EMULATED_GPU_MEMORY_MIB (the memory check's tests).
size_t device_memory_bytes() {
  return mib_from_env("LATTICE_EMULATED_GPU_MEMORY_MIB",
                      static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE)));
}

cudaStream_t compute_stream() { return emu::compute_stream(); }
cudaStream_t copy_stream() { return reinterpret_cast<cudaStream_t>(uintptr_t{2}); }  // no queue: synchronous

void* allocate(size_t bytes) {
  void* p = std::malloc(bytes > 0 ? bytes : 1);
  if (p == nullptr) throw Error(fmt::format("emulated cudaMallocAsync of {} bytes: out of memory", bytes));
  std::memset(p, 0xff, bytes);
  std::lock_guard<std::mutex> lock(pool_mutex);
  live()[p] = bytes;
  used += bytes;
  peak = std::max(peak, used);
  return p;
}

void release(void* ptr) {
  if (ptr == nullptr) return;
  emu::run_on(compute_stream(), [ptr] {  // the work queued before may still read it
    std::lock_guard<std::mutex> lock(pool_mutex);
    auto it = live().find(ptr);
    if (it == live().end()) std::abort();  // freeing what the pool never gave: a bug worth a core dump
    used -= it->second;
    live().erase(it);
    std::free(ptr);
  });
}

size_t pool_used_bytes() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  return used;
}

size_t pool_peak_bytes() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  return peak;
}

// No context or libraries hold device memory here: LATTICE_EMULATED_GPU_OUTSIDE_POOL_MIB stands in
// for them (the memory report's test), else 0.
size_t used_outside_pool_bytes() {
  return mib_from_env("LATTICE_EMULATED_GPU_OUTSIDE_POOL_MIB", 0);
}

// As the real ones: a copy in the compute stream's order, and the host waits for it.
void copy_to_host(const void* device_src, void* host_dst, int64_t bytes) {
  if (bytes <= 0) return;
  cudaMemcpyAsync(host_dst, device_src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, compute_stream());
  synchronize();
}
void copy_from_host(const void* host_src, void* device_dst, int64_t bytes) {
  copy_from_pinned(host_src, device_dst, bytes);
  synchronize();
}

void* allocate_pinned(size_t bytes) {
  void* p = std::malloc(bytes > 0 ? bytes : 1);
  if (p == nullptr) throw Error(fmt::format("emulated cudaHostAlloc of {} bytes: out of memory", bytes));
  return p;
}
void free_pinned(void* ptr) { std::free(ptr); }
void copy_from_pinned(const void* pinned_src, void* device_dst, int64_t bytes) {  // the host does not wait
  if (bytes > 0) {
    cudaMemcpyAsync(device_dst, pinned_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, compute_stream());
  }
}

void synchronize() { cudaStreamSynchronize(compute_stream()); }

// No profiler to start: a log line per call, which tests/cuda_emu/profile_capture_emulated_test.sh places
// among the step lines.
void set_profiler_capture(bool on) {
  if (!on) synchronize();
  spdlog::info("emulated {}", on ? "cudaProfilerStart" : "cudaProfilerStop");
}

std::shared_ptr<void> record_on(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  cudaEventCreateWithFlags(&event, 0);
  cudaEventRecord(event, stream);
  return std::shared_ptr<CUevent_st>(event, cudaEventDestroy);
}

}  // namespace lattice::cuda

namespace lattice::emu {

bool is_device_memory(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(cuda::pool_mutex);
  const auto* p = static_cast<const char*>(ptr);
  for (const auto& [base, size] : cuda::live()) {
    const auto* b = static_cast<const char*>(base);
    if (p >= b && p + bytes <= b + size) return true;
  }
  return false;
}

}  // namespace lattice::emu
