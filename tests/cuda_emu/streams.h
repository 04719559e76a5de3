// Streams and events of the emulated CUDA runtime (tests/cuda_emu). The compute and copy streams
// are synchronous: a kernel or copy runs when it is issued, so their events are complete when
// recorded and a wait on one of them is a host wait. A stream made with cudaStreamCreate* is a
// queue, as a GPU's is: each item starts once the one before it has finished, and the queues move
// whenever the host records, queries or waits for an event (or issues more work). The emulated
// NCCL (nccl_emu.cc) puts its operations there as MPI non-blocking calls, so a send that waits for
// its receiver holds up what its stream has after it, cudaEventQuery answers cudaErrorNotReady
// while an operation is in flight, and a stream that waits for an event does not start its later
// work before it.
#pragma once

#include <chrono>
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

// Queues `work` on `stream`; on the synchronous streams it runs now (the host waits for it).
void enqueue(cudaStream_t stream, std::unique_ptr<AsyncWork> work);

// Moves every queue as far as it goes now.
void progress();

}  // namespace lattice::emu

// An event: recorded at a point of a stream, complete once the item before that point finished.
struct CUevent_st {
  std::chrono::steady_clock::time_point when;   // when the point was reached (seen by the host)
  std::shared_ptr<lattice::emu::StreamItem> after;  // null: nothing was in flight
};
