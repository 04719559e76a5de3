// MpiCommunicator: nonblocking MPI operations wrapped in PendingOps that hold their tensors.
// Device tensors go through host staging buffers (MPI here is not CUDA-aware): inputs are copied
// to the host at the call, outputs back to the device when the operation completes.
#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "kernels/error.h"
#include "parallel/host_staging.h"
#include "parallel/mpi_bf16_ops.h"
#include "parallel/mpi_runtime.h"

namespace lattice {

struct MpiCommunicator::Info {
  int world_rank;
  std::string group;       // describe()
  std::vector<int> peers;  // the group's other world ranks, which a hung collective waits for
};

namespace {

// For moving data: bf16 travels as its 16-bit patterns.
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kI32: return MPI_INT32_T;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBF16: return MPI_UINT16_T;
  }
  throw Error("no MPI datatype for this dtype");
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  throw Error("unknown ReduceOp");
}

// A reduction's datatype and op: MPI's own, except for bf16 (MPI has no bf16 type): its 16-bit
// patterns with the user-defined ops that round every combine to bf16.
std::pair<MPI_Datatype, MPI_Op> mpi_reduction(DType dtype, ReduceOp op) {
  if (dtype == DType::kBF16) return {MPI_UINT16_T, bf16_reduce_op(op)};
  return {mpi_type(dtype), mpi_op(op)};
}

// Whether `block` is rank `rank`'s block of `whole` in the same host memory: the in-place form of
// reduce_scatter (out in in) and all_gather (in in out), as NCCL defines it. Another overlap of
// the two is an error.
bool in_place(const Tensor& whole, const Tensor& block, int rank, const char* op) {
  if (whole.device() != Device::kCpu || block.device() != Device::kCpu) return false;  // staged apart
  const char* w = static_cast<const char*>(whole.raw());
  const char* b = static_cast<const char*>(block.raw());
  if (b == w + static_cast<size_t>(rank) * block.bytes()) return true;
  LATTICE_CHECK(b + block.bytes() <= w || w + whole.bytes() <= b,
                "{}: the input and the output overlap, and the smaller is not this rank's block of the larger", op);
  return false;
}

// "f32[4, 256] (4 KiB)"
std::string tensor_summary(const Tensor& t) {
  return fmt::format("{}{} ({})", dtype_name(t.dtype()), shape_string(t.shape()),
                     format_bytes(static_cast<double>(t.bytes())));
}

// One MPI operation, possibly several requests (chunks), and the tensors they touch.
class MpiOp : public PendingOp {
 public:
  MpiOp(std::shared_ptr<const void> info_owner, int world_rank, const std::string* group,
        const std::vector<int>* group_peers, std::string operation)
      : info_owner_(std::move(info_owner)), world_rank_(world_rank), group_(group), group_peers_(group_peers),
        operation_(std::move(operation)) {}
  ~MpiOp() override = default;

  std::vector<MPI_Request> requests;
  std::vector<Tensor> keep_alive;  // the buffers MPI reads and writes (host tensors)
  // Device tensors' host buffers; outputs are copied back once the requests complete, which every
  // wait (host, stream, watchdog) and test() observes through test().
  HostStaging staging;
  // recv: element count each request must deliver (a shorter message is an error).
  std::vector<int> expected_counts;
  MPI_Datatype recv_type = MPI_DATATYPE_NULL;
  // send, recv: the world rank of the peer, the only rank they wait for (else the whole group).
  int p2p_peer = -1;
  // Runs once the requests completed, after the staged outputs are copied back.
  std::function<void()> on_complete;

  bool test() override {
    if (done_) return true;
    int flag = 0;
    if (expected_counts.empty()) {
      MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                            MPI_STATUSES_IGNORE));
    } else {
      std::vector<MPI_Status> statuses(requests.size());
      MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                            statuses.data()));
      if (flag) {
        for (size_t i = 0; i < statuses.size(); ++i) {
          int got = 0;
          MPI_CHECK(MPI_Get_count(&statuses[i], recv_type, &got));
          if (got != expected_counts[i]) {
            done_ = true;
            keep_alive.clear();
            throw Error(fmt::format("rank {}: {} on {}: the message had {} elements, expected {} "
                                    "(sender and receiver disagree on the tensor's shape)",
                                    world_rank_, operation_, *group_, got, expected_counts[i]));
          }
        }
      }
    }
    if (flag) {
      done_ = true;
      staging.finish();
      if (on_complete) on_complete();
      keep_alive.clear();
    }
    return done_;
  }

  OpDescription describe() const override {
    return {world_rank_, *group_, operation_, p2p_peer >= 0 ? std::vector<int>{p2p_peer} : *group_peers_};
  }

 private:
  std::shared_ptr<const void> info_owner_;  // keeps *group_ and *group_peers_ alive
  int world_rank_;
  const std::string* group_;
  const std::vector<int>* group_peers_;
  std::string operation_;
  bool done_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, std::string detail,
                                 std::shared_ptr<Watchdog> watchdog)
    : Communicator(std::move(watchdog)), comm_(comm), name_(std::move(name)), detail_(std::move(detail)) {
  LATTICE_CHECK(comm_ != MPI_COMM_NULL, "MpiCommunicator '{}' given MPI_COMM_NULL", name_);
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  MPI_Group group, world_group;
  MPI_CHECK(MPI_Comm_group(comm_, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  std::vector<int> local(size_);
  for (int i = 0; i < size_; ++i) local[i] = i;
  world_ranks_.resize(size_);
  MPI_CHECK(MPI_Group_translate_ranks(group, size_, local.data(), world_group, world_ranks_.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  info_ = std::make_shared<const Info>(Info{world_rank_, describe(), other_world_ranks()});
  host_ = std::make_unique<MpiHostChannel>(comm_, info_->group, info_->peers, watchdog_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) {
    MPI_Comm_free(&comm_);
  }
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(std::shared_ptr<Watchdog> watchdog) {
  MPI_Comm comm;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  if (watchdog != nullptr) watchdog->set_census(HangCensus::create());
  return std::make_unique<MpiCommunicator>(comm, "world", "", std::move(watchdog));
}

std::string MpiCommunicator::describe() const {
  std::string ranks;
  if (size_ <= 16) {
    ranks = fmt::format("world ranks [{}]", fmt::join(world_ranks_, ", "));
  } else {
    ranks = fmt::format("{} ranks: [{}, {}, ..., {}]", size_, world_ranks_[0], world_ranks_[1],
                        world_ranks_.back());
  }
  return fmt::format("group '{}' ({}{}{})", name_, ranks, detail_.empty() ? "" : "; ", detail_);
}

void MpiCommunicator::set_max_count(int64_t max_count) {
  LATTICE_CHECK(max_count >= 1 && max_count <= INT_MAX, "max_count {} outside [1, INT_MAX]", max_count);
  max_count_ = max_count;
}

void MpiCommunicator::check_defined(const Tensor& t, const char* op, const char* what) const {
  if (!t.defined()) throw Error(fmt::format("{} on {}: the {} tensor is undefined", op, describe(), what));
}

void MpiCommunicator::check_block(int64_t count, const char* op) const {
  if (count > max_count_) {
    throw Error(fmt::format("{} on {}: one rank's block has {} elements, more than MPI's count limit "
                            "of {}; split the tensor into smaller calls",
                            op, describe(), count, max_count_));
  }
}

CommHandle MpiCommunicator::all_reduce_async(const Tensor& inout, ReduceOp op) {
  check_defined(inout, "all_reduce", "in/out");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("all_reduce({}) of {}", reduce_op_name(op), tensor_summary(inout)));
  const Tensor buffer = pending->staging.output(inout, /*copy_in=*/true);
  const int64_t n = inout.numel();
  char* data = static_cast<char*>(buffer.raw());
  const size_t elem = dtype_size(inout.dtype());
  const auto [type, mpi_reduce_op] = mpi_reduction(inout.dtype(), op);
  for (int64_t begin = 0; begin < n; begin += max_count_) {
    int count = static_cast<int>(std::min<int64_t>(max_count_, n - begin));
    MPI_Request request;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + begin * elem, count, type, mpi_reduce_op, comm_, &request));
    pending->requests.push_back(request);
  }
  pending->keep_alive.push_back(buffer);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::reduce_scatter_async(const Tensor& in, const Tensor& out) {
  check_defined(in, "reduce_scatter", "input");
  check_defined(out, "reduce_scatter", "output");
  check_blocks("reduce_scatter", in, "input", out, "output");
  check_block(out.numel(), "reduce_scatter");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("reduce_scatter(sum) of {} into {}", tensor_summary(in), tensor_summary(out)));
  const auto [type, mpi_reduce_op] = mpi_reduction(in.dtype(), ReduceOp::kSum);
  MPI_Request request;
  if (in_place(in, out, rank_, "reduce_scatter")) {
    // MPI's in-place form leaves the result at the start of the buffer: moved to this rank's block
    // on completion (the other blocks hold nothing of use afterwards).
    MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, in.raw(), static_cast<int>(out.numel()), type, mpi_reduce_op,
                                        comm_, &request));
    if (rank_ != 0) pending->on_complete = [in, out] { std::memcpy(out.raw(), in.raw(), out.bytes()); };
    pending->keep_alive = {in};
  } else {
    const Tensor in_buffer = pending->staging.input(in);
    const Tensor out_buffer = pending->staging.output(out, /*copy_in=*/false);
    MPI_CHECK(MPI_Ireduce_scatter_block(in_buffer.raw(), out_buffer.raw(), static_cast<int>(out.numel()), type,
                                        mpi_reduce_op, comm_, &request));
    pending->keep_alive = {in_buffer, out_buffer};
  }
  pending->requests.push_back(request);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::all_gather_async(const Tensor& in, const Tensor& out) {
  check_defined(in, "all_gather", "input");
  check_defined(out, "all_gather", "output");
  check_blocks("all_gather", out, "output", in, "input");
  check_block(in.numel(), "all_gather");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("all_gather of {} into {}", tensor_summary(in), tensor_summary(out)));
  const int count = static_cast<int>(in.numel());
  MPI_Request request;
  if (in_place(out, in, rank_, "all_gather")) {
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.raw(), count, mpi_type(out.dtype()), comm_,
                             &request));
    pending->keep_alive = {out};
  } else {
    const Tensor in_buffer = pending->staging.input(in);
    const Tensor out_buffer = pending->staging.output(out, /*copy_in=*/false);
    MPI_CHECK(MPI_Iallgather(in_buffer.raw(), count, mpi_type(in.dtype()), out_buffer.raw(), count,
                             mpi_type(out.dtype()), comm_, &request));
    pending->keep_alive = {in_buffer, out_buffer};
  }
  pending->requests.push_back(request);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::broadcast_async(const Tensor& inout, int root) {
  check_defined(inout, "broadcast", "in/out");
  check_peer(root, "broadcast", "root");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("broadcast from group rank {} of {}", root, tensor_summary(inout)));
  // The root sends its value; the others only receive, so they need not copy theirs in.
  const Tensor buffer = pending->staging.output(inout, /*copy_in=*/rank_ == root);
  const int64_t n = inout.numel();
  char* data = static_cast<char*>(buffer.raw());
  const size_t elem = dtype_size(inout.dtype());
  for (int64_t begin = 0; begin < n; begin += max_count_) {
    int count = static_cast<int>(std::min<int64_t>(max_count_, n - begin));
    MPI_Request request;
    MPI_CHECK(MPI_Ibcast(data + begin * elem, count, mpi_type(inout.dtype()), root, comm_, &request));
    pending->requests.push_back(request);
  }
  pending->keep_alive.push_back(buffer);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::send_async(const Tensor& in, int dst, int tag) {
  check_defined(in, "send", "input");
  check_peer(dst, "send", "destination");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("send of {} to group rank {} (world rank {}), tag {}", tensor_summary(in), dst,
                  world_ranks_[dst], tag));
  pending->p2p_peer = world_ranks_[dst];
  const Tensor buffer = pending->staging.input(in);
  const int64_t n = in.numel();
  char* data = static_cast<char*>(buffer.raw());
  const size_t elem = dtype_size(in.dtype());
  // Chunks of one pair and tag arrive in order (MPI's non-overtaking rule); an empty tensor is
  // still one (empty) message so that the receiver's matching recv completes.
  int64_t begin = 0;
  do {
    int count = static_cast<int>(std::min<int64_t>(max_count_, n - begin));
    MPI_Request request;
    MPI_CHECK(MPI_Isend(data + begin * elem, count, mpi_type(in.dtype()), dst, tag, comm_, &request));
    pending->requests.push_back(request);
    begin += max_count_;
  } while (begin < n);
  pending->keep_alive.push_back(buffer);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::recv_async(const Tensor& out, int src, int tag) {
  check_defined(out, "recv", "output");
  check_peer(src, "recv", "source");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("recv of {} from group rank {} (world rank {}), tag {}", tensor_summary(out), src,
                  world_ranks_[src], tag));
  pending->p2p_peer = world_ranks_[src];
  const Tensor buffer = pending->staging.output(out, /*copy_in=*/false);
  const int64_t n = out.numel();
  char* data = static_cast<char*>(buffer.raw());
  const size_t elem = dtype_size(out.dtype());
  pending->recv_type = mpi_type(out.dtype());
  int64_t begin = 0;
  do {
    int count = static_cast<int>(std::min<int64_t>(max_count_, n - begin));
    MPI_Request request;
    MPI_CHECK(MPI_Irecv(data + begin * elem, count, mpi_type(out.dtype()), src, tag, comm_, &request));
    pending->requests.push_back(request);
    pending->expected_counts.push_back(count);
    begin += max_count_;
  } while (begin < n);
  pending->keep_alive.push_back(buffer);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::all_to_all_async(const Tensor& in, const Tensor& out) {
  check_defined(in, "all_to_all", "input");
  check_defined(out, "all_to_all", "output");
  const int64_t block = check_all_to_all(in, out);
  check_block(block, "all_to_all");
  auto pending = std::make_unique<MpiOp>(
      info_, world_rank_, &info_->group, &info_->peers,
      fmt::format("all_to_all of {}", tensor_summary(in)));
  const Tensor in_buffer = pending->staging.input(in);
  const Tensor out_buffer = pending->staging.output(out, /*copy_in=*/false);
  MPI_Request request;
  MPI_CHECK(MPI_Ialltoall(in_buffer.raw(), static_cast<int>(block), mpi_type(in.dtype()), out_buffer.raw(),
                          static_cast<int>(block), mpi_type(out.dtype()), comm_, &request));
  pending->requests.push_back(request);
  pending->keep_alive = {in_buffer, out_buffer};
  return CommHandle(std::move(pending), watchdog_, stream_);
}

CommHandle MpiCommunicator::barrier_async() {
  auto pending = std::make_unique<MpiOp>(info_, world_rank_, &info_->group, &info_->peers, "barrier");
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm_, &request));
  pending->requests.push_back(request);
  return CommHandle(std::move(pending), watchdog_, stream_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, std::string name,
                                                     std::string detail) {
  MPI_Comm comm;
  MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &comm));
  if (comm == MPI_COMM_NULL) return nullptr;
  auto result = std::make_unique<MpiCommunicator>(comm, std::move(name), std::move(detail), watchdog_);
  result->set_max_count(max_count_);
  return result;
}

}  // namespace lattice
