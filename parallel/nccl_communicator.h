// NcclCommunicator: a group's collectives on CUDA tensors through one non-blocking NCCL
// communicator, issued on the group's own CUDA stream after an event recorded on the compute
// stream (so NCCL reads what the kernels before the call wrote), each operation's completion an
// event on that stream. The group's MpiCommunicator stays its bootstrap (the NCCL unique id is
// broadcast over it), its host channel, and the transport of CPU tensors. Point-to-point on CUDA
// tensors is NCCL's: ordered (no tags), so the pipeline puts its transfers on lanes of their own
// (parallel/p2p_order.h, pipeline_lanes.h), where a send waiting for its receiver cannot hold up a
// receive. Built with --config=cuda only.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace lattice {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `mpi`'s members. The current CUDA device must be this rank's own GPU.
  explicit NcclCommunicator(std::unique_ptr<Communicator> mpi);
  ~NcclCommunicator() override;

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  const std::string& name() const override { return mpi_->name(); }
  const std::vector<int>& world_ranks() const override { return mpi_->world_ranks(); }
  std::string describe() const override { return mpi_->describe(); }

  CommHandle all_reduce_async(const Tensor& inout, ReduceOp op = ReduceOp::kSum) override;
  CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) override;
  CommHandle all_gather_async(const Tensor& in, const Tensor& out) override;
  CommHandle broadcast_async(const Tensor& inout, int root) override;
  // CUDA tensors: ncclSend / ncclRecv, tags ignored (ordered_p2p); CPU tensors: MPI.
  CommHandle send_async(const Tensor& in, int dst, int tag = 0) override;
  CommHandle recv_async(const Tensor& out, int src, int tag = 0) override;
  bool ordered_p2p() const override { return true; }
  // CUDA tensors: one NCCL group of a send and a receive per rank (itself included).
  CommHandle all_to_all_async(const Tensor& in, const Tensor& out) override;
  CommHandle barrier_async() override { return mpi_->barrier_async(); }

  std::unique_ptr<Communicator> split(int color, int key, std::string name, std::string detail) override;

  HostChannel& host() override { return mpi_->host(); }

  struct State;  // the NCCL communicator, shared with the pending operations that poll it

 private:
  // Orders the NCCL stream after the compute stream, issues `call` (a non-blocking communicator
  // may answer ncclInProgress: polled to the end), records the completion event. p2p_peer: a send's
  // or receive's peer (group rank), the only rank a hang asks about; -1 asks the whole group.
  CommHandle enqueue(std::string operation, std::vector<Tensor> keep_alive, const char* call_name,
                     const std::function<ncclResult_t(cudaStream_t)>& call, int p2p_peer = -1);

  std::unique_ptr<Communicator> mpi_;
  std::shared_ptr<State> state_;
  cudaStream_t nccl_stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // recorded on the compute stream before each operation
};

}  // namespace lattice
