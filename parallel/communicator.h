// Communicator: one process group (tp, dp, pp, embedding, world) and its collectives on Tensors,
// each with an async form returning a CommHandle. Passed explicitly; there is no global group.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "parallel/watchdog.h"

namespace lattice {

enum class ReduceOp { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);

// An outstanding operation. Move-only. wait() blocks (under the watchdog) until it completes;
// test() makes progress and says whether it has. The handle keeps the tensors' storage alive until
// completion. Destroying a pending handle waits for it. A default-constructed handle is complete.
class CommHandle {
 public:
  CommHandle() = default;
  CommHandle(std::unique_ptr<PendingOp> op, std::shared_ptr<const Watchdog> watchdog);
  CommHandle(CommHandle&& other) noexcept = default;
  CommHandle& operator=(CommHandle&& other) noexcept;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle();

  void wait();
  bool test();
  bool pending() const { return op_ != nullptr; }

 private:
  void finish_or_abandon() noexcept;

  std::unique_ptr<PendingOp> op_;
  std::shared_ptr<const Watchdog> watchdog_;
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
  // "group 'tp' (world ranks [0, 1]; pp 0, dp 0)": used in errors and hang reports.
  virtual std::string describe() const = 0;

  // In place: every rank's `inout` becomes the elementwise reduction over the group.
  virtual CommHandle all_reduce_async(const Tensor& inout, ReduceOp op = ReduceOp::kSum) = 0;
  // in has size() × out.numel() elements; rank r's out = sum over ranks of in's r-th block.
  virtual CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) = 0;
  // out has size() × in.numel() elements; block r of out = rank r's in.
  virtual CommHandle all_gather_async(const Tensor& in, const Tensor& out) = 0;
  // root's `inout` is copied to every rank's `inout`.
  virtual CommHandle broadcast_async(const Tensor& inout, int root) = 0;
  virtual CommHandle send_async(const Tensor& in, int dst, int tag = 0) = 0;
  virtual CommHandle recv_async(const Tensor& out, int src, int tag = 0) = 0;
  // in and out have size() blocks; block j of rank i's in lands in block i of rank j's out.
  virtual CommHandle all_to_all_async(const Tensor& in, const Tensor& out) = 0;
  virtual CommHandle barrier_async() = 0;

  // Sync forms: the async form + wait(), so the watchdog covers them too.
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

  Watchdog& watchdog() const { return *watchdog_; }
  const std::shared_ptr<Watchdog>& watchdog_ptr() const { return watchdog_; }

 protected:
  std::shared_ptr<Watchdog> watchdog_;
};

}  // namespace lattice
