// LocalCommunicator: a group of one process (no MPI). Collectives are identities (or copies), so a
// one-process run uses the same code paths as a parallel one; point-to-point has no peer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/local_host_channel.h"

namespace lattice {

class LocalCommunicator : public Communicator {
 public:
  // `name` as in describe() ("tp", "pp", ...).
  explicit LocalCommunicator(std::string name = "self", std::shared_ptr<Watchdog> watchdog = nullptr);

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  std::string describe() const override;

  // Every operation completes at once; the returned handle is never pending.
  CommHandle all_reduce_async(const Tensor& inout, ReduceOp op = ReduceOp::kSum) override;
  CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) override;  // out = in
  CommHandle all_gather_async(const Tensor& in, const Tensor& out) override;      // out = in
  CommHandle broadcast_async(const Tensor& inout, int root) override;
  CommHandle send_async(const Tensor& in, int dst, int tag = 0) override;  // an internal error
  CommHandle recv_async(const Tensor& out, int src, int tag = 0) override;  // an internal error
  CommHandle all_to_all_async(const Tensor& in, const Tensor& out) override;  // out = in
  CommHandle barrier_async() override;

  std::unique_ptr<Communicator> split(int color, int key, std::string name, std::string detail) override;

  HostChannel& host() override { return host_; }

 private:
  std::string name_;
  LocalHostChannel host_;
  std::vector<int> world_ranks_ = {0};
};

}  // namespace lattice
