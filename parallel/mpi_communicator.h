// MpiCommunicator: the Communicator over an MPI communicator, with MPI-3 nonblocking collectives
// and an MpiHostChannel; sub-groups come from MPI_Comm_split. CPU tensors go to MPI directly;
// tensors on another device (CUDA) are staged through host buffers (parallel/host_staging.h):
// inputs copied at the call, outputs copied back when a wait or test() sees the operation complete.
// bf16 reduces through user-defined ops that round every combine (parallel/mpi_bf16_ops.h).
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mpi_host_channel.h"

namespace lattice {

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (MPI_Comm_free in the destructor, if MPI is still running).
  // `detail` goes into describe(), e.g. "pp 0, dp 1".
  MpiCommunicator(MPI_Comm comm, std::string name, std::string detail,
                  std::shared_ptr<Watchdog> watchdog);
  ~MpiCommunicator() override;

  // A duplicate of MPI_COMM_WORLD named "world".
  static std::unique_ptr<MpiCommunicator> world(std::shared_ptr<Watchdog> watchdog);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }
  std::string describe() const override;

  CommHandle all_reduce_async(const Tensor& inout, ReduceOp op = ReduceOp::kSum) override;
  CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) override;
  CommHandle all_gather_async(const Tensor& in, const Tensor& out) override;
  CommHandle broadcast_async(const Tensor& inout, int root) override;
  CommHandle send_async(const Tensor& in, int dst, int tag = 0) override;
  CommHandle recv_async(const Tensor& out, int src, int tag = 0) override;
  CommHandle all_to_all_async(const Tensor& in, const Tensor& out) override;
  CommHandle barrier_async() override;

  std::unique_ptr<Communicator> split(int color, int key, std::string name,
                                      std::string detail) override;

  HostChannel& host() override { return *host_; }

  MPI_Comm comm() const { return comm_; }

  // MPI counts are int. all_reduce, broadcast, send and recv split larger tensors into messages of
  // at most max_count elements; reduce_scatter, all_gather and all_to_all throw when one rank's
  // block exceeds it. Tests lower it to exercise the chunking; every rank must use the same value.
  // Inherited by split().
  void set_max_count(int64_t max_count);
  int64_t max_count() const { return max_count_; }

 private:
  struct Info;  // what a pending op reports when it hangs
  void check_defined(const Tensor& t, const char* op, const char* what) const;
  void check_block(int64_t count, const char* op) const;

  MPI_Comm comm_;
  std::string name_;
  std::string detail_;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
  std::vector<int> world_ranks_;
  int64_t max_count_ = INT_MAX;
  std::shared_ptr<const Info> info_;
  std::unique_ptr<MpiHostChannel> host_;
};

}  // namespace lattice
