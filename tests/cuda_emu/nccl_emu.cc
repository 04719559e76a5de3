// NCCL for the emulated CUDA backend (tests/cuda_emu), over MPI, so that parallel/nccl_communicator.cc
// runs unchanged where no GPU is: a communicator is an MPI communicator of its members, and each
// operation an MPI non-blocking call queued on the caller's CUDA stream (streams.h), started once
// what the stream has before it has finished and complete when MPI says so. As on a GPU, a stream's
// operations run one after another (a send that waits for its receiver holds up the next one),
// point-to-point transfers match in issue order, and the events recorded after an operation answer
// "not ready" until it completes. It refuses what NCCL would: a buffer that is not device memory,
// a peer or root outside the communicator, a count MPI cannot carry.
// Reductions are MPI's (bf16: parallel/mpi_bf16_ops.h, rounding at every combine as NCCL does); not
// NCCL's ring or tree order, so sums over more than two ranks may round differently than on GPUs.
// The unique id names the process that made it (NCCL rank 0), which the others join over
// MPI_COMM_WORLD with tags of their own before MPI_Comm_create_group makes the communicator.
// A group (ncclGroupStart/End) is one item on its stream whose calls are all posted at once.
#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "parallel/mpi_bf16_ops.h"
#include "tests/cuda_emu/device_memory.h"
#include "tests/cuda_emu/shim/nccl.h"
#include "tests/cuda_emu/streams.h"

namespace {

constexpr uint32_t kIdMagic = 0x4c4e4545;
// Above the pipeline's tags (< 32768 on its own communicators; these travel on MPI_COMM_WORLD,
// which the program's MPI communicators only duplicate).
constexpr int kJoinTag = 32701, kMembersTag = 32702, kCreateTag = 32703;

struct EmulatedId {
  uint32_t magic;
  int creator;  // the world rank that made it: NCCL rank 0
  int64_t serial;
};
static_assert(sizeof(EmulatedId) <= sizeof(ncclUniqueId));

// The communicator's state: queued operations keep it (and its MPI communicator) alive after the
// handle is destroyed, as NCCL finishes what was enqueued.
struct CommState {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 0;
  std::atomic<bool> aborted{false};
  std::atomic<ncclResult_t> async_error{ncclSuccess};

  ~CommState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !aborted && mpi != MPI_COMM_NULL) MPI_Comm_free(&mpi);
  }
};

std::string& last_error_without_comm() {
  static std::string text;
  return text;
}

}  // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
  std::string last_error;
};

namespace {

struct OpenGroup {
  int depth = 0;                  // ncclGroupStart calls not yet ended
  bool failed = false;            // a call in it was refused: ncclGroupEnd reports it, issues nothing
  cudaStream_t stream = nullptr;  // the group's one stream (more than one is not emulated)
  std::vector<std::unique_ptr<lattice::emu::AsyncWork>> operations;
};
thread_local OpenGroup open_group;

// A refusal inside a group fails the group too, as NCCL's does.
ncclResult_t refuse(ncclComm_t comm, ncclResult_t result, std::string why) {
  (comm != nullptr ? comm->last_error : last_error_without_comm()) = "emulated NCCL: " + std::move(why);
  if (open_group.depth > 0) open_group.failed = true;
  return result;
}

size_t element_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt32:
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    case ncclBfloat16: return 2;
  }
  return 0;
}

MPI_Datatype mpi_type(ncclDataType_t type) {
  switch (type) {
    case ncclInt32: return MPI_INT32_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclBfloat16: return MPI_UINT16_T;  // the bit patterns: reductions through bf16_reduce_op
  }
  return MPI_DATATYPE_NULL;
}

bool mpi_op(ncclRedOp_t op, ncclDataType_t type, MPI_Op* out) {
  lattice::ReduceOp reduce;
  switch (op) {
    case ncclSum: reduce = lattice::ReduceOp::kSum; break;
    case ncclMax: reduce = lattice::ReduceOp::kMax; break;
    case ncclMin: reduce = lattice::ReduceOp::kMin; break;
    default: return false;  // prod and avg: not used by Lattice, not emulated
  }
  if (type == ncclBfloat16) {
    *out = lattice::bf16_reduce_op(reduce);
  } else {
    *out = reduce == lattice::ReduceOp::kSum ? MPI_SUM : reduce == lattice::ReduceOp::kMax ? MPI_MAX : MPI_MIN;
  }
  return true;
}

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto *pa = static_cast<const char*>(a), *pb = static_cast<const char*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

// An operation on the stream: posted by `post` when the stream reaches it, polled with MPI_Test.
class MpiOperation : public lattice::emu::AsyncWork {
 public:
  // Posts the MPI call; `scratch` lives until the operation finishes (an input copied at the start).
  using Post = std::function<int(MPI_Comm, std::vector<char>& scratch, MPI_Request*)>;
  MpiOperation(std::shared_ptr<CommState> comm, Post post) : comm_(std::move(comm)), post_(std::move(post)) {}

  void start() override {
    if (comm_->aborted) return;
    if (post_(comm_->mpi, scratch_, &request_) != MPI_SUCCESS) comm_->async_error = ncclSystemError;
  }

  bool finished() override {
    if (comm_->aborted || request_ == MPI_REQUEST_NULL) return true;  // an abort ends what was in flight
    int done = 0;
    if (MPI_Test(&request_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      comm_->async_error = ncclSystemError;
      return true;
    }
    return done != 0;
  }

 private:
  std::shared_ptr<CommState> comm_;
  Post post_;
  std::vector<char> scratch_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// The calls between ncclGroupStart and ncclGroupEnd: one item on their stream, every MPI call of
// it posted together and complete when all are, so that they progress together as NCCL's do (two
// ranks' sends to each other do not wait for the receives behind them).
class GroupedOperations : public lattice::emu::AsyncWork {
 public:
  explicit GroupedOperations(std::vector<std::unique_ptr<lattice::emu::AsyncWork>> operations)
      : operations_(std::move(operations)) {}

  void start() override {
    for (auto& op : operations_) op->start();
  }

  bool finished() override {
    bool all = true;
    for (auto& op : operations_) all = op->finished() && all;  // polls every one
    return all;
  }

 private:
  std::vector<std::unique_ptr<lattice::emu::AsyncWork>> operations_;
};

// The checks every operation makes, then the operation queued on `stream` (in a group: held until
// ncclGroupEnd).
struct Buffer {
  const void* ptr;
  size_t bytes;
  const char* what;
};

ncclResult_t enqueue(const char* call, ncclComm_t comm, size_t count, ncclDataType_t type, std::vector<Buffer> buffers,
                     cudaStream_t stream, MpiOperation::Post post) {
  if (comm == nullptr) return refuse(nullptr, ncclInvalidArgument, fmt::format("{}: comm is null", call));
  if (element_bytes(type) == 0)
    return refuse(comm, ncclInvalidArgument, fmt::format("{}: datatype {} is not emulated", call, int(type)));
  if (count > static_cast<size_t>(INT_MAX) / static_cast<size_t>(comm->state->size))
    return refuse(comm, ncclInvalidArgument, fmt::format("{}: count {} is more than MPI's int carries", call, count));
  for (const Buffer& b : buffers) {
    if (b.bytes > 0 && !lattice::emu::is_device_memory(b.ptr, b.bytes))
      return refuse(comm, ncclInvalidArgument,
                    fmt::format("{}: {} ({} bytes at {}) is not device memory", call, b.what, b.bytes, b.ptr));
  }
  auto operation = std::make_unique<MpiOperation>(comm->state, std::move(post));
  if (open_group.depth == 0) {
    lattice::emu::enqueue(stream, std::move(operation));
    return ncclSuccess;
  }
  if (!open_group.operations.empty() && stream != open_group.stream)
    return refuse(comm, ncclInvalidUsage, fmt::format("{}: a group's calls on more than one stream are not emulated",
                                                      call));
  open_group.stream = stream;
  open_group.operations.push_back(std::move(operation));
  return ncclSuccess;
}

ncclResult_t check_peer(const char* call, ncclComm_t comm, int peer, const char* what) {
  if (comm != nullptr && (peer < 0 || peer >= comm->state->size))
    return refuse(comm, ncclInvalidArgument,
                  fmt::format("{}: {} {} is outside the communicator of {}", call, what, peer, comm->state->size));
  return ncclSuccess;
}

// `bytes` at `p` copied into `scratch` (when the stream reaches the operation).
const void* copy_into(std::vector<char>& scratch, const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  scratch.assign(c, c + bytes);
  return scratch.data();
}

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  static std::atomic<int64_t> serial{0};
  EmulatedId id{kIdMagic, 0, serial++};
  MPI_Comm_rank(MPI_COMM_WORLD, &id.creator);
  std::memset(unique_id, 0, sizeof *unique_id);
  std::memcpy(unique_id->internal, &id, sizeof id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  EmulatedId id{};
  std::memcpy(&id, comm_id.internal, sizeof id);
  if (id.magic != kIdMagic)
    return refuse(nullptr, ncclInvalidArgument, "ncclCommInitRankConfig: the id was not made by ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(nullptr, ncclInvalidArgument, fmt::format("ncclCommInitRankConfig: rank {} of {}", rank, nranks));
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::vector<int> members(static_cast<size_t>(nranks), -1);
  if (rank == 0) {
    if (id.creator != world_rank)
      return refuse(nullptr, ncclInvalidUsage,
                    "ncclCommInitRankConfig: the emulation needs the id's maker as rank 0 (it gathers the members)");
    members[0] = world_rank;
    for (int i = 1; i < nranks; ++i) {
      int64_t join[3];
      MPI_Recv(join, 3, MPI_INT64_T, MPI_ANY_SOURCE, kJoinTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (join[0] != id.serial || join[1] < 1 || join[1] >= nranks || members[static_cast<size_t>(join[1])] != -1)
        return refuse(nullptr, ncclInternalError, "ncclCommInitRankConfig: a join that does not fit this communicator");
      members[static_cast<size_t>(join[1])] = static_cast<int>(join[2]);
    }
    for (int i = 1; i < nranks; ++i)
      MPI_Send(members.data(), nranks, MPI_INT, members[static_cast<size_t>(i)], kMembersTag, MPI_COMM_WORLD);
  } else {
    const int64_t join[3] = {id.serial, rank, world_rank};
    MPI_Send(join, 3, MPI_INT64_T, id.creator, kJoinTag, MPI_COMM_WORLD);
    MPI_Recv(members.data(), nranks, MPI_INT, id.creator, kMembersTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  auto state = std::make_shared<CommState>();
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, members.data(), &group);
  const int created = MPI_Comm_create_group(MPI_COMM_WORLD, group, kCreateTag, &state->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (created != MPI_SUCCESS) return refuse(nullptr, ncclSystemError, "ncclCommInitRankConfig: MPI_Comm_create_group");
  state->rank = rank;
  state->size = nranks;
  *comm = new ncclComm{std::move(state), {}};
  // A non-blocking communicator is "in progress" at first: the caller polls ncclCommGetAsyncError.
  return config != nullptr && config->blocking == 0 ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm != nullptr ? ncclSuccess : refuse(nullptr, ncclInvalidArgument, "ncclCommFinalize: comm is null");
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;  // its queued operations keep the state until they finish
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->state->aborted = true;  // what is in flight ends; its MPI requests are abandoned
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr) return refuse(nullptr, ncclInvalidArgument, "ncclCommGetAsyncError: comm is null");
  lattice::emu::progress();
  *async_error = comm->state->async_error;
  return ncclSuccess;
}

ncclResult_t ncclGetVersion(int* version) {
  *version = 22800;  // the emulator's own number (its collectives are MPI's)
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  return (comm != nullptr ? comm->last_error : last_error_without_comm()).c_str();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  MPI_Op reduce;
  if (!mpi_op(op, datatype, &reduce))
    return refuse(comm, ncclInvalidArgument, fmt::format("ncclAllReduce: op {} is not emulated", int(op)));
  const size_t bytes = count * element_bytes(datatype);
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclAllReduce", comm, count, datatype, {{sendbuff, bytes, "sendbuff"}, {recvbuff, bytes, "recvbuff"}},
                 stream, [=](MPI_Comm mpi, std::vector<char>&, MPI_Request* request) {
                   const void* in = sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff;
                   return MPI_Iallreduce(in, recvbuff, static_cast<int>(count), type, reduce, mpi, request);
                 });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  MPI_Op reduce;
  if (!mpi_op(op, datatype, &reduce))
    return refuse(comm, ncclInvalidArgument, fmt::format("ncclReduceScatter: op {} is not emulated", int(op)));
  const size_t out_bytes = recvcount * element_bytes(datatype);
  const size_t in_bytes = comm != nullptr ? out_bytes * static_cast<size_t>(comm->state->size) : 0;
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclReduceScatter", comm, recvcount, datatype,
                 {{sendbuff, in_bytes, "sendbuff"}, {recvbuff, out_bytes, "recvbuff"}}, stream,
                 [=](MPI_Comm mpi, std::vector<char>& scratch, MPI_Request* request) {
                   // NCCL's in-place form (recvbuff inside sendbuff) is not MPI's: reduce from a copy.
                   const void* in = overlap(sendbuff, in_bytes, recvbuff, out_bytes)
                                        ? copy_into(scratch, sendbuff, in_bytes) : sendbuff;
                   return MPI_Ireduce_scatter_block(in, recvbuff, static_cast<int>(recvcount), type, reduce, mpi,
                                                    request);
                 });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t in_bytes = sendcount * element_bytes(datatype);
  const size_t out_bytes = comm != nullptr ? in_bytes * static_cast<size_t>(comm->state->size) : 0;
  const int rank = comm != nullptr ? comm->state->rank : 0;
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclAllGather", comm, sendcount, datatype,
                 {{sendbuff, in_bytes, "sendbuff"}, {recvbuff, out_bytes, "recvbuff"}}, stream,
                 [=](MPI_Comm mpi, std::vector<char>& scratch, MPI_Request* request) {
                   // In place (sendbuff is this rank's block of recvbuff): MPI_IN_PLACE; another
                   // overlap: gather from a copy.
                   const void* in = sendbuff;
                   if (sendbuff == static_cast<const char*>(recvbuff) + static_cast<size_t>(rank) * in_bytes)
                     in = MPI_IN_PLACE;
                   else if (overlap(sendbuff, in_bytes, recvbuff, out_bytes))
                     in = copy_into(scratch, sendbuff, in_bytes);
                   return MPI_Iallgather(in, static_cast<int>(sendcount), type, recvbuff, static_cast<int>(sendcount),
                                         type, mpi, request);
                 });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = check_peer("ncclBroadcast", comm, root, "root"); r != ncclSuccess) return r;
  const size_t bytes = count * element_bytes(datatype);
  const bool is_root = comm != nullptr && comm->state->rank == root;
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclBroadcast", comm, count, datatype,
                 {{is_root ? sendbuff : nullptr, is_root ? bytes : 0, "sendbuff"}, {recvbuff, bytes, "recvbuff"}},
                 stream, [=](MPI_Comm mpi, std::vector<char>&, MPI_Request* request) {
                   if (is_root && sendbuff != recvbuff) std::memmove(recvbuff, sendbuff, bytes);
                   return MPI_Ibcast(recvbuff, static_cast<int>(count), type, root, mpi, request);
                 });
}

// Point-to-point: tag 0 on the communicator, so transfers between two ranks match in issue order.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (const ncclResult_t r = check_peer("ncclSend", comm, peer, "peer"); r != ncclSuccess) return r;
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclSend", comm, count, datatype, {{sendbuff, count * element_bytes(datatype), "sendbuff"}}, stream,
                 [=](MPI_Comm mpi, std::vector<char>&, MPI_Request* request) {
                   return MPI_Isend(sendbuff, static_cast<int>(count), type, peer, 0, mpi, request);
                 });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (const ncclResult_t r = check_peer("ncclRecv", comm, peer, "peer"); r != ncclSuccess) return r;
  const MPI_Datatype type = mpi_type(datatype);
  return enqueue("ncclRecv", comm, count, datatype, {{recvbuff, count * element_bytes(datatype), "recvbuff"}}, stream,
                 [=](MPI_Comm mpi, std::vector<char>&, MPI_Request* request) {
                   return MPI_Irecv(recvbuff, static_cast<int>(count), type, peer, 0, mpi, request);
                 });
}

ncclResult_t ncclGroupStart() {
  ++open_group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (open_group.depth == 0) return refuse(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--open_group.depth > 0) return ncclSuccess;  // nested: the outermost end issues the group
  OpenGroup group = std::exchange(open_group, OpenGroup{});
  if (group.failed) return ncclInvalidArgument;  // nothing of a group with a refused call is issued
  if (!group.operations.empty())
    lattice::emu::enqueue(group.stream, std::make_unique<GroupedOperations>(std::move(group.operations)));
  return ncclSuccess;
}
