// Streams and events of the emulated CUDA runtime (tests/cuda_emu). A stream is a queue, as a GPU's
// is: each item starts once the one before it has finished, and the queues move whenever the host
// records, queries or waits for an event, or issues more work (on any host thread: the watchdog's
// polls move them too). The compute stream's work (kernels, copies, GEMMs, frees) runs as it is
// issued while nothing holds the stream back; behind a host function that is still running, or a
// wait for an event not yet reached, it waits its turn, so the host runs ahead of it as it does of
// a GPU, and a missing event shows. The streams progress on their own, or, as under
// CUDA_DEVICE_MAX_CONNECTIONS=1, through one hardware queue (below). The copy stream
// (runtime_emu.cc) is synchronous: its work runs when issued and a wait on it is a host wait. The
// emulated NCCL (nccl_emu.cc) puts its operations on queued streams as MPI non-blocking calls, so a
// send that waits for its receiver holds up what its stream has after it, and cudaEventQuery
// answers cudaErrorNotReady while an operation is in flight.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "tests/cuda_emu/shim/cuda_types.h"

namespace lattice::emu {

// One item of work on a queued stream.
class AsyncWork {
 public:
  virtual ~AsyncWork() = default;
  virtual void start() = 0;     // when everything before it on its stream has finished
  virtual bool finished() = 0;  // polled after start() until it answers true
};

struct StreamItem;

// Queues `work` on `stream`; on a synchronous stream it runs now (the host waits for it).
void enqueue(cudaStream_t stream, std::unique_ptr<AsyncWork> work);

// The compute stream (kernels/cuda/runtime.h's compute_stream()).
cudaStream_t compute_stream();

// Device work that finishes when `fn` returns (a kernel launch, a copy, a GEMM), as one item of
// `stream` (null: the compute stream). Issued while an item runs, it is part of that item and runs now.
void run_on(cudaStream_t stream, std::function<void()> fn);

// Moves every queue as far as it goes now.
void progress();

// One hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment at start): the queued
// streams' work starts in issue order, so an item that cannot start yet (behind its stream's
// unfinished work, a wait for an event not reached) holds back everything issued after it, on every
// stream; work that has started runs beside what follows. That is parallel/p2p_order.h's
// kOneHardwareQueue. The copy stream stays synchronous, outside the queue. The setter is for tests,
// and refuses while work waits to start.
bool one_hardware_queue();
void set_one_hardware_queue(bool one);

}  // namespace lattice::emu

// An event: recorded at a point of a stream, complete once the item before that point finished.
struct CUevent_st {
  std::chrono::steady_clock::time_point when;   // when the point was reached (seen by the host)
  std::shared_ptr<lattice::emu::StreamItem> after;  // null: nothing was in flight
};
