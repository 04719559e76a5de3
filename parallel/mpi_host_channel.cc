// MpiHostChannel: nonblocking MPI byte collectives whose buffers the pending op owns, waited for
// under the watchdog like every communication handle.
#include "parallel/mpi_host_channel.h"

#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"
#include "parallel/mpi_runtime.h"

namespace lattice {

// One request and its send/receive buffers. If the watchdog throws (an injected action returned),
// the op is leaked with its buffers, so that MPI never writes into freed memory.
class MpiHostChannel::Op : public PendingOp {
 public:
  Op(OpDescription description, size_t in_bytes, const void* in, size_t out_bytes)
      : in(static_cast<const char*>(in), static_cast<const char*>(in) + in_bytes), out(out_bytes),
        description_(std::move(description)) {}

  bool test() override {
    if (!done_) {
      int flag = 0;
      MPI_CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
      done_ = flag != 0;
    }
    return done_;
  }
  OpDescription describe() const override { return description_; }

  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> in;
  std::vector<char> out;

 private:
  OpDescription description_;
  bool done_ = false;
};

namespace {

int mpi_count(size_t bytes, std::string_view what) {
  LATTICE_CHECK(bytes <= INT_MAX, "host channel: {} has {} bytes, more than MPI's count limit", what, bytes);
  return static_cast<int>(bytes);
}

}  // namespace

MpiHostChannel::MpiHostChannel(MPI_Comm group, std::string describe, std::vector<int> peers,
                               std::shared_ptr<const Watchdog> watchdog)
    : describe_(std::move(describe)), peers_(std::move(peers)), watchdog_(std::move(watchdog)) {
  LATTICE_CHECK(watchdog_ != nullptr, "a host channel needs a watchdog");
  MPI_CHECK(MPI_Comm_dup(group, &comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
}

MpiHostChannel::~MpiHostChannel() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void MpiHostChannel::check_root(int root, std::string_view what) const {
  LATTICE_CHECK(root >= 0 && root < size_, "host channel of {}: {} from root {}, not a rank of the group (size {})",
                describe_, what, root, size_);
}

void MpiHostChannel::finish(std::unique_ptr<Op> op, void* out) const {
  Op* pending = op.release();  // leaked if the watchdog throws (see Op)
  watchdog_->wait(*pending);
  if (!pending->out.empty()) std::memcpy(out, pending->out.data(), pending->out.size());
  delete pending;
}

void MpiHostChannel::all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view what) {
  auto op = std::make_unique<Op>(
      OpDescription{world_rank_, describe_, fmt::format("host all_gather of {} ({})", format_bytes(bytes), what),
                    peers_},
      bytes, in, bytes * size_);
  MPI_CHECK(MPI_Iallgather(op->in.data(), mpi_count(bytes, what), MPI_BYTE, op->out.data(), mpi_count(bytes, what),
                           MPI_BYTE, comm_, &op->request));
  finish(std::move(op), out);
}

void MpiHostChannel::broadcast_bytes(void* data, size_t bytes, int root, std::string_view what) {
  check_root(root, what);
  auto op = std::make_unique<Op>(
      OpDescription{world_rank_, describe_,
                    fmt::format("host broadcast from group rank {} of {} ({})", root, format_bytes(bytes), what), peers_},
      0, data, bytes);
  if (rank_ == root) std::memcpy(op->out.data(), data, bytes);
  MPI_CHECK(MPI_Ibcast(op->out.data(), mpi_count(bytes, what), MPI_BYTE, root, comm_, &op->request));
  finish(std::move(op), data);
}

void MpiHostChannel::gather_bytes(const void* in, size_t bytes, const std::vector<size_t>& counts, void* out,
                                  int root, std::string_view what) {
  check_root(root, what);
  size_t total = 0;
  std::vector<int> recv_counts, displacements;
  if (rank_ == root) {
    for (size_t count : counts) {
      recv_counts.push_back(mpi_count(count, what));
      displacements.push_back(mpi_count(total, what));
      total += count;
    }
  }
  auto op = std::make_unique<Op>(
      OpDescription{world_rank_, describe_,
                    fmt::format("host gather to group rank {} of {} ({})", root, format_bytes(bytes), what), peers_},
      bytes, in, total);
  MPI_CHECK(MPI_Igatherv(op->in.data(), mpi_count(bytes, what), MPI_BYTE, op->out.data(), recv_counts.data(),
                         displacements.data(), MPI_BYTE, root, comm_, &op->request));
  finish(std::move(op), out);
}

}  // namespace lattice
