// The CUDA runtime state of this process: its device, its compute stream, the stream-ordered
// memory pool, pinned staging and events. One GPU per process (issue 12); every kernel of the CUDA
// backend is enqueued on compute_stream().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime.h>

namespace lattice::cuda {

// How many CUDA devices are visible; throws lattice::InputError (exit 2) "no CUDA device is visible
// (cudaGetDeviceCount: <reason>)" when none is, with what is missing (kernels/no_cuda_device.h).
int visible_device_count();
// Makes GPU local_rank mod visible the process's device (before any other call below). Returns a
// line for the log naming the device.
std::string select_device(int local_rank, int local_size);
// The selected device's UUID (cudaDeviceProp::uuid): the same GPU whatever CUDA_VISIBLE_DEVICES
// numbers it, so ranks that report one UUID share a GPU.
std::array<uint8_t, 16> device_uuid();
// The selected device's model name as the driver reports it (cudaDeviceProp::name).
std::string device_model();
// The model with what else decides which GEMM algorithms exist and which bits they give (cuBLAS
// promises the same bits only for the same architecture and SM count): "NAME, sm_XY, N SMs".
std::string device_identity();
// The selected device's compute capability as major * 10 + minor (90: Hopper).
int device_compute_capability();
// The selected device's memory in all (cudaDeviceProp::totalGlobalMem).
size_t device_memory_bytes();
// The compute stream every kernel runs on (created on first use, non-blocking; on device 0 when
// select_device was not called).
cudaStream_t compute_stream();

// Memory from the device's stream-ordered pool (cudaMallocAsync on compute_stream()), released
// back to it in stream order; the pool keeps what it has (release threshold: unlimited), so steady
// steps allocate nothing from the driver.
void* allocate(size_t bytes);
void release(void* ptr);
// Bytes of the pool in use now and at most since the process started.
size_t pool_used_bytes();
size_t pool_peak_bytes();
// The device's memory in use now beyond what the pool holds (cudaMemGetInfo's total less free,
// less the pool's reserved bytes): the CUDA context, cuBLASLt's and cuDNN's handles and kernels,
// NCCL's buffers, and any other process on this GPU. The memory plan counts none of these.
size_t used_outside_pool_bytes();

// Host <-> device copies that return when the host side may be read / reused: staged through one
// pinned buffer per direction (an async copy from pageable memory is synchronous anyway).
void copy_to_host(const void* device_src, void* host_dst, int64_t bytes);
void copy_from_host(const void* host_src, void* device_dst, int64_t bytes);

// Page-locked host memory (cudaHostAlloc, portable), freed with free_pinned; and an H2D copy from it enqueued
// on compute_stream() that returns at once (the host keeps the source unchanged until an event
// recorded after it has completed).
void* allocate_pinned(size_t bytes);
void free_pinned(void* ptr);
void copy_from_pinned(const void* pinned_src, void* device_dst, int64_t bytes);

// The second stream: device -> host copies that overlap the compute stream's work (checkpoint
// snapshots), ordered against it by events. Created at first use on the process's device.
cudaStream_t copy_stream();

// The host blocks until the compute stream is drained.
void synchronize();

// on: cudaProfilerStart. off: the host waits for every stream of the device (the captured work ends
// inside the capture), then cudaProfilerStop. For nsys --capture-range=cudaProfilerApi.
void set_profiler_capture(bool on);

// A timing event recorded at `stream`'s current point, owned by the pointer: the device event of a
// lattice::Event on the CUDA backend (any stream of the process's device: compute, copy, NCCL).
std::shared_ptr<void> record_on(cudaStream_t stream);

}  // namespace lattice::cuda
