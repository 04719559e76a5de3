// NcclCommunicator (see nccl_communicator.h) and nccl_world for a CUDA build.
#include "parallel/nccl_communicator.h"

#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/error.h"
#include "parallel/nccl_world.h"
#include "parallel/trace.h"
#include "parallel/watchdog.h"

namespace lattice {

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int world_rank = -1;
  std::string group;  // the MPI group's describe()
  std::vector<int> peers;  // the group's other world ranks, which a hung collective waits for
  bool abandoned = false;  // a call timed out: the job is ending, nothing more is asked of NCCL

  ~State() {
    if (comm == nullptr) return;
    // Destroyed while an error unwinds (the job is ending: run_train calls MPI_Abort) or after a
    // timed-out call: finalizing or aborting could wait for the very hang being reported, so the
    // communicator is left to the process's end.
    if (abandoned || std::uncaught_exceptions() > 0) return;
    // A non-blocking communicator finalizes asynchronously: poll it (briefly), then free it.
    ncclResult_t result = ncclCommFinalize(comm);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (result == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      ncclCommGetAsyncError(comm, &result);
    }
    if (result != ncclSuccess) spdlog::warn("rank {}: ncclCommFinalize on {}: {}", world_rank, group, ncclGetErrorString(result));
    ncclCommDestroy(comm);
  }

  [[noreturn]] void fail(const char* call, ncclResult_t result, const std::string& operation) const {
    throw Error(fmt::format("rank {}: NCCL {} ({}) on {} failed: {}{}", world_rank, call, operation, group,
                            ncclGetErrorString(result),
                            comm != nullptr ? fmt::format(" ({})", ncclGetLastError(comm)) : std::string()));
  }

  // A non-blocking communicator answers ncclInProgress while it initializes or enqueues (a first
  // use connects to the peers, whose hosts must reach the same call): poll its state to the end.
  // Past `timeout_s` the error ends the job with the watchdog's exit code (run_train's MPI_Abort);
  // the communicator is not aborted, as ncclCommAbort may wait for kernels a hang keeps queued.
  void settle(ncclResult_t result, const char* call, const std::string& operation, double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    while (result == ncclInProgress) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout_s > 0 && waited > timeout_s) {
        abandoned = true;
        throw Error(hang_message({world_rank, group, fmt::format("NCCL {} ({})", call, operation)}, timeout_s, waited),
                    ExitCode::kHungCollective);
      }
      std::this_thread::yield();
      const ncclResult_t queried = ncclCommGetAsyncError(comm, &result);
      if (queried != ncclSuccess) fail("ncclCommGetAsyncError", queried, operation);
    }
    if (result != ncclSuccess) fail(call, result, operation);
  }
};

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kF64: return ncclFloat64;
  }
  throw Error("no NCCL datatype for this dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  throw Error("unknown ReduceOp");
}

bool on_gpu(const Tensor& t) { return t.defined() && t.device() == Device::kCuda; }

std::string tensor_summary(const Tensor& t) {
  return fmt::format("{}{} ({})", dtype_name(t.dtype()), shape_string(t.shape()),
                     format_bytes(static_cast<double>(t.bytes())));
}

// One NCCL operation: its completion event on the group's NCCL stream and the tensors it touches.
class NcclOp : public PendingOp {
 public:
  // p2p_peer: a send's or receive's peer (world rank), the only rank it waits for; -1 for collectives.
  NcclOp(std::shared_ptr<NcclCommunicator::State> state, std::string operation, int p2p_peer,
         std::vector<Tensor> keep_alive, std::shared_ptr<void> done_event)
      : state_(std::move(state)),
        operation_(std::move(operation)),
        p2p_peer_(p2p_peer),
        keep_alive_(std::move(keep_alive)),
        done_event_(std::move(done_event)) {}

  Event device_completion() const override { return Event::adopt(Device::kCuda, done_event_); }

  bool test() override {
    if (done_) return true;
    // An asynchronous NCCL error (a peer died, a network fault) surfaces here, naming the call.
    if (state_->comm != nullptr) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(state_->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) state_->fail("operation", async, operation_);
    }
    const cudaError_t query = cudaEventQuery(static_cast<cudaEvent_t>(done_event_.get()));
    if (query == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it so the next launch check does not see it
      return false;
    }
    LATTICE_CUDA_CHECK(query);
    done_ = true;
    keep_alive_.clear();
    return true;
  }

  OpDescription describe() const override {
    return {state_->world_rank, state_->group, operation_,
            p2p_peer_ >= 0 ? std::vector<int>{p2p_peer_} : state_->peers};
  }

  // A timed-out wait: abort the communicator (every later call on it fails, naming that).
  void abort() noexcept override {
    if (state_->comm == nullptr) return;
    ncclCommAbort(state_->comm);
    state_->comm = nullptr;
  }

 private:
  std::shared_ptr<NcclCommunicator::State> state_;
  std::string operation_;
  int p2p_peer_;
  std::vector<Tensor> keep_alive_;
  std::shared_ptr<void> done_event_;
  bool done_ = false;
};

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> mpi)
    : Communicator(mpi->watchdog_ptr()), mpi_(std::move(mpi)), state_(std::make_shared<State>()) {
  stream_ = Stream(Device::kCuda);  // handles record their events on the compute stream
  state_->world_rank = mpi_->world_ranks()[mpi_->rank()];
  state_->group = mpi_->describe();
  state_->peers = mpi_->other_world_ranks();
  ncclUniqueId id{};
  if (rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) state_->fail("ncclGetUniqueId", r, "creating the communicator");
  }
  id = mpi_->host().broadcast(id, 0, "the NCCL unique id");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a hang can be aborted (GPU.md, NCCL)
  state_->settle(ncclCommInitRankConfig(&state_->comm, size(), id, rank(), &config), "ncclCommInitRankConfig",
                 "creating the communicator", watchdog().timeout_s());
  LATTICE_CUDA_CHECK(cudaStreamCreateWithFlags(&nccl_stream_, cudaStreamNonBlocking));
  LATTICE_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
  if (compute_ready_ != nullptr) cudaEventDestroy(compute_ready_);
  if (nccl_stream_ != nullptr) cudaStreamDestroy(nccl_stream_);  // released once its work completes
}

CommHandle NcclCommunicator::enqueue(std::string operation, std::vector<Tensor> keep_alive, const char* call_name,
                                     const std::function<ncclResult_t(cudaStream_t)>& call, int p2p_peer) {
  if (state_->comm == nullptr || state_->abandoned)
    throw Error(fmt::format("rank {}: {} on {}: the NCCL communicator was {}", state_->world_rank, operation,
                            state_->group, state_->abandoned ? "abandoned after a call timed out" : "aborted"));
  // Traced: the anchor on the compute stream comes first, so the span's start (on the NCCL stream,
  // after it waited for the compute stream) is never before it.
  const bool traced = tracer_ != nullptr && tracer_->enabled();
  const TraceAnchor anchor = traced ? tracer_->anchor(stream_) : TraceAnchor{};
  LATTICE_CUDA_CHECK(cudaEventRecord(compute_ready_, cuda::compute_stream()));
  LATTICE_CUDA_CHECK(cudaStreamWaitEvent(nccl_stream_, compute_ready_, 0));
  const std::shared_ptr<void> start = traced ? cuda::record_on(nccl_stream_) : nullptr;
  state_->settle(call(nccl_stream_), call_name, operation, watchdog().timeout_s());
  std::shared_ptr<void> done = cuda::record_on(nccl_stream_);
  if (traced) {
    tracer_->span(operation, "nccl " + name(), anchor, Event::adopt(Device::kCuda, start),
                  Event::adopt(Device::kCuda, done));
  }
  const int peer_world = p2p_peer >= 0 ? mpi_->world_ranks()[static_cast<size_t>(p2p_peer)] : -1;
  auto op = std::make_unique<NcclOp>(state_, std::move(operation), peer_world, std::move(keep_alive), std::move(done));
  return CommHandle(std::move(op), watchdog_, stream_);
}

CommHandle NcclCommunicator::all_reduce_async(const Tensor& inout, ReduceOp op) {
  if (!on_gpu(inout)) return mpi_->all_reduce_async(inout, op);
  return enqueue(fmt::format("all_reduce({}) of {}", reduce_op_name(op), tensor_summary(inout)), {inout},
                 "ncclAllReduce", [&](cudaStream_t s) {
                   return ncclAllReduce(inout.raw(), inout.raw(), static_cast<size_t>(inout.numel()),
                                        nccl_type(inout.dtype()), nccl_op(op), state_->comm, s);
                 });
}

CommHandle NcclCommunicator::reduce_scatter_async(const Tensor& in, const Tensor& out) {
  if (!on_gpu(in) || !on_gpu(out)) return mpi_->reduce_scatter_async(in, out);
  check_blocks("reduce_scatter", in, "input", out, "output");
  return enqueue(fmt::format("reduce_scatter(sum) of {} into {}", tensor_summary(in), tensor_summary(out)), {in, out},
                 "ncclReduceScatter", [&](cudaStream_t s) {
                   return ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()),
                                            nccl_type(in.dtype()), ncclSum, state_->comm, s);
                 });
}

CommHandle NcclCommunicator::all_gather_async(const Tensor& in, const Tensor& out) {
  if (!on_gpu(in) || !on_gpu(out)) return mpi_->all_gather_async(in, out);
  check_blocks("all_gather", out, "output", in, "input");
  return enqueue(fmt::format("all_gather of {} into {}", tensor_summary(in), tensor_summary(out)), {in, out},
                 "ncclAllGather", [&](cudaStream_t s) {
                   return ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()),
                                        state_->comm, s);
                 });
}

CommHandle NcclCommunicator::broadcast_async(const Tensor& inout, int root) {
  if (!on_gpu(inout)) return mpi_->broadcast_async(inout, root);
  check_peer(root, "broadcast", "root");
  return enqueue(fmt::format("broadcast from group rank {} of {}", root, tensor_summary(inout)), {inout},
                 "ncclBroadcast", [&](cudaStream_t s) {
                   return ncclBroadcast(inout.raw(), inout.raw(), static_cast<size_t>(inout.numel()),
                                        nccl_type(inout.dtype()), root, state_->comm, s);
                 });
}

CommHandle NcclCommunicator::send_async(const Tensor& in, int dst, int tag) {
  if (!on_gpu(in)) return mpi_->send_async(in, dst, tag);
  check_peer(dst, "send", "destination");
  return enqueue(fmt::format("send of {} to group rank {}", tensor_summary(in), dst), {in}, "ncclSend",
                 [&](cudaStream_t s) {
                   return ncclSend(in.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()), dst, state_->comm,
                                   s);
                 },
                 dst);
}

CommHandle NcclCommunicator::recv_async(const Tensor& out, int src, int tag) {
  if (!on_gpu(out)) return mpi_->recv_async(out, src, tag);
  check_peer(src, "recv", "source");
  return enqueue(fmt::format("recv of {} from group rank {}", tensor_summary(out), src), {out}, "ncclRecv",
                 [&](cudaStream_t s) {
                   return ncclRecv(out.raw(), static_cast<size_t>(out.numel()), nccl_type(out.dtype()), src,
                                   state_->comm, s);
                 },
                 src);
}

// Grouped sends and receives rather than ncclAlltoAll, which NCCL has only since 2.28: the GPU
// machines load the NCCL of PyTorch's wheels, whose version is theirs. Calls in one group progress
// together, so no rank's send waits for a receive queued behind it.
CommHandle NcclCommunicator::all_to_all_async(const Tensor& in, const Tensor& out) {
  if (!on_gpu(in) || !on_gpu(out)) return mpi_->all_to_all_async(in, out);
  const int64_t block = check_all_to_all(in, out);
  const size_t block_bytes = static_cast<size_t>(block) * dtype_size(in.dtype());
  return enqueue(fmt::format("all_to_all of {}", tensor_summary(in)), {in, out}, "ncclGroupEnd (all_to_all)",
                 [&](cudaStream_t s) {
                   const auto* send = static_cast<const char*>(in.raw());
                   auto* recv = static_cast<char*>(out.raw());
                   const ncclDataType_t type = nccl_type(in.dtype());
                   ncclResult_t result = ncclGroupStart();
                   if (result != ncclSuccess) return result;
                   for (int peer = 0; peer < size() && result == ncclSuccess; ++peer) {
                     const size_t at = static_cast<size_t>(peer) * block_bytes;
                     result = ncclSend(send + at, static_cast<size_t>(block), type, peer, state_->comm, s);
                     if (result == ncclSuccess)
                       result = ncclRecv(recv + at, static_cast<size_t>(block), type, peer, state_->comm, s);
                   }
                   const ncclResult_t ended = ncclGroupEnd();  // always: a group must be closed
                   return result != ncclSuccess ? result : ended;
                 });
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, std::string name, std::string detail) {
  std::unique_ptr<Communicator> child = mpi_->split(color, key, std::move(name), std::move(detail));
  if (child == nullptr) return nullptr;
  auto nccl = std::make_unique<NcclCommunicator>(std::move(child));
  nccl->set_tracer(tracer_);
  return nccl;
}

std::string nccl_unfit_reason(int most_ranks_on_a_gpu) {
  if (most_ranks_on_a_gpu <= 1) return "";
  return fmt::format("{} ranks share one GPU and NCCL needs a GPU per rank", most_ranks_on_a_gpu);
}

std::string nccl_version() {
  int v = 0;  // major·10000 + minor·100 + patch since NCCL 2.9
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

std::unique_ptr<Communicator> nccl_world(std::unique_ptr<MpiCommunicator> mpi_world, int most_ranks_on_a_gpu) {
  const std::string unfit = nccl_unfit_reason(most_ranks_on_a_gpu);
  if (!unfit.empty())
    throw InputError(fmt::format("parallel.backend is \"nccl\" but {}: launch at most one rank per GPU, or set "
                                 "parallel.backend to \"mpi\" (host-staged, ranks may share a GPU)",
                                 unfit));
  return std::make_unique<NcclCommunicator>(std::move(mpi_world));
}

}  // namespace lattice
