// Communicator: one process group (tp, dp, pp, embedding, world) and its collectives on Tensors,
// each with an async form returning a CommHandle, plus the group's host control channel. Passed
// explicitly; there is no global group.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/host_channel.h"
#include "parallel/watchdog.h"

namespace lattice {

class Tracer;

enum class ReduceOp { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);

// An outstanding operation. Move-only. The handle keeps the tensors' storage alive until
// completion. Destroying a pending handle waits for it (host). A default-constructed handle is
// complete. Two kinds of wait:
//   wait_on(stream): work enqueued on `stream` afterwards runs after the operation — what a consumer
//     of the result on the device needs (ordering). On a device transport (NCCL) the host does not
//     block: `stream` waits for the operation's device completion event, the handle is no longer
//     pending, and the watchdog keeps the operation until it completes (Watchdog::keep_in_flight).
//     MPI (host-driven; device tensors staged through host buffers, copied back at completion):
//     ordering work after the operation means completing it now: it blocks the host like wait().
//   wait(): the host blocks (under the watchdog) until the operation has completed — before the
//     host reuses or frees a buffer, or reads a result itself. Every host wait is under the watchdog.
// test() makes progress and says whether the operation has completed.
class CommHandle {
 public:
  CommHandle() = default;
  // `stream`: the communicator's stream, which the operation was enqueued on (records enqueued()).
  CommHandle(std::unique_ptr<PendingOp> op, std::shared_ptr<const Watchdog> watchdog,
             const Stream& stream = Stream());
  CommHandle(CommHandle&& other) noexcept = default;
  CommHandle& operator=(CommHandle&& other) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle();

  void wait();
  void wait_on(const Stream& stream);
  bool test();
  bool pending() const { return op_ != nullptr; }

  // Recorded on the communicator's stream when the operation was enqueued.
  const Event& enqueued() const { return enqueued_; }
  // Where the operation completed: recorded once a wait or test() saw it complete (MPI: the host's
  // observation), or by a device-side wait_on (the transport's device completion event); not
  // recorded while pending or for a default-constructed handle.
  const Event& completed() const { return completed_; }

 private:
  void finish_or_abandon() noexcept;

  std::unique_ptr<PendingOp> op_;
  std::shared_ptr<const Watchdog> watchdog_;
  Stream stream_;
  Event enqueued_;
  Event completed_;
};

// Tensors are handles onto shared storage, so outputs are taken by const reference too: the
// collective writes into the storage. Element counts and dtypes must match across the group
// exactly as for MPI; every rank must call collectives of one group in the same order.
class Communicator {
 public:
  explicit Communicator(std::shared_ptr<Watchdog> watchdog);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  // MPI_COMM_WORLD rank of each group member, in group rank order.
  virtual const std::vector<int>& world_ranks() const = 0;
  // world_ranks() less this rank's: what a hung collective on the group waits for (OpDescription::peers).
  std::vector<int> other_world_ranks() const;
  // "group 'tp' (world ranks [0, 1]; pp 0, dp 0)": used in errors and hang reports.
  virtual std::string describe() const = 0;

  // In place: every rank's `inout` becomes the elementwise reduction over the group.
  virtual CommHandle all_reduce_async(const Tensor& inout, ReduceOp op = ReduceOp::kSum) = 0;
  // in has size() × out.numel() elements; rank r's out = sum over ranks of in's r-th block. In
  // place (NCCL's form) when out is this rank's block of in; in's other blocks are then unspecified.
  virtual CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) = 0;
  // out has size() × in.numel() elements; block r of out = rank r's in. In place when in is this
  // rank's block of out.
  virtual CommHandle all_gather_async(const Tensor& in, const Tensor& out) = 0;
  // root's `inout` is copied to every rank's `inout`.
  virtual CommHandle broadcast_async(const Tensor& inout, int root) = 0;
  // Point-to-point. MPI matches a receive by (source, tag). An ordered transport (ordered_p2p():
  // NCCL on CUDA tensors) has no tags: the sends and receives between two ranks match in the order
  // each side issues them, and a send may wait for its receiver — the pipeline then issues its
  // transfers as parallel/p2p_order.h says.
  virtual CommHandle send_async(const Tensor& in, int dst, int tag = 0) = 0;
  virtual CommHandle recv_async(const Tensor& out, int src, int tag = 0) = 0;
  virtual bool ordered_p2p() const { return false; }
  // in and out have size() blocks; block j of rank i's in lands in block i of rank j's out.
  virtual CommHandle all_to_all_async(const Tensor& in, const Tensor& out) = 0;
  virtual CommHandle barrier_async() = 0;

  // Sync forms: the async form + wait() (the host waits), so the watchdog covers them too. A caller
  // that only orders device work after the result uses the async form + wait_on(stream).
  void all_reduce(const Tensor& inout, ReduceOp op = ReduceOp::kSum) { all_reduce_async(inout, op).wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out) { reduce_scatter_async(in, out).wait(); }
  void all_gather(const Tensor& in, const Tensor& out) { all_gather_async(in, out).wait(); }
  void broadcast(const Tensor& inout, int root) { broadcast_async(inout, root).wait(); }
  void send(const Tensor& in, int dst, int tag = 0) { send_async(in, dst, tag).wait(); }
  void recv(const Tensor& out, int src, int tag = 0) { recv_async(out, src, tag).wait(); }
  void all_to_all(const Tensor& in, const Tensor& out) { all_to_all_async(in, out).wait(); }
  void barrier() { barrier_async().wait(); }

  // Collective over this group (every member calls it, in the same order as other splits): the
  // members with the same color form a new group ordered by key. color < 0: this rank joins no
  // group and gets nullptr. `detail` goes into describe() ("pp 0, dp 1"). The new group shares
  // this one's watchdog.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name,
                                              std::string detail) = 0;

  // Host control values over the same members (exact sums, votes, timings): never through tensors.
  virtual HostChannel& host() = 0;
  // The stream this group's operations are enqueued on (MPI: a CPU stream, run inline).
  const Stream& stream() const { return stream_; }
  // Where a transport that runs its operations on a device stream of its own (NCCL) traces them: a
  // lane per group ("nccl dp"), each operation a span from its start to its end on that stream, timed
  // by its events. NCCL groups split from this one afterwards inherit it. nullptr (the default): none.
  // MPI's operations are host-driven: the waits for them are traced where they happen.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }

  Watchdog& watchdog() const { return *watchdog_; }
  const std::shared_ptr<Watchdog>& watchdog_ptr() const { return watchdog_; }

 protected:
  // Errors naming this group (every transport's): `peer` must be one of its ranks; `whole` must have
  // size() × `block`'s elements and its dtype (reduce_scatter's input, all_gather's output).
  void check_peer(int peer, const char* op, const char* what) const;
  void check_blocks(const char* op, const Tensor& whole, const char* whole_name, const Tensor& block,
                    const char* block_name) const;
  // all_to_all's (defined tensors): the same dtype and element count, size() blocks, and no shared
  // storage (no transport has an in-place form). Returns the block's element count.
  int64_t check_all_to_all(const Tensor& in, const Tensor& out) const;

  std::shared_ptr<Watchdog> watchdog_;
  Stream stream_{Device::kCpu};
  Tracer* tracer_ = nullptr;
};

}  // namespace lattice
