// CommHandle: host and stream waits under the watchdog, and its events; reduce op names.
#include "parallel/communicator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"

namespace lattice {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

CommHandle::CommHandle(std::unique_ptr<PendingOp> op, std::shared_ptr<const Watchdog> watchdog, const Stream& stream)
    : op_(std::move(op)), watchdog_(std::move(watchdog)), stream_(stream), enqueued_(stream.record()) {
  LATTICE_CHECK(op_ == nullptr || watchdog_ != nullptr, "a pending CommHandle needs a watchdog");
}

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    finish_or_abandon();
    op_ = std::move(other.op_);
    watchdog_ = std::move(other.watchdog_);
    stream_ = other.stream_;
    enqueued_ = other.enqueued_;
    completed_ = other.completed_;
  }
  return *this;
}

CommHandle::~CommHandle() { finish_or_abandon(); }

void CommHandle::wait() {
  if (!op_) return;
  // If the watchdog throws (an injected action returned), the operation is still in flight: the
  // op (and the tensors it holds) is deliberately leaked so that MPI never writes into freed memory.
  PendingOp* op = op_.release();
  watchdog_->wait(*op);
  delete op;
  completed_ = stream_.record();
}

void CommHandle::wait_on(const Stream& stream) {
  if (op_) {
    const Event done = op_->device_completion();
    if (done.recorded() && done.device() == stream.device()) {
      // A device transport: `stream` waits on the device and the host goes on. The watchdog keeps
      // the operation (and its tensors) until it completes, and the host waits for it under the
      // timeout before the step's read-back.
      stream.wait(done);
      completed_ = done;
      watchdog_->keep_in_flight(std::move(op_));
      return;
    }
  }
  // A host-driven operation (MPI): complete it now (see the header).
  wait();
  stream.wait(completed_);
}

bool CommHandle::test() {
  if (!op_) return true;
  if (!op_->test()) return false;
  op_.reset();
  completed_ = stream_.record();
  return true;
}

void CommHandle::finish_or_abandon() noexcept {
  if (!op_) return;
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("pending communication abandoned in a handle's destructor: {}", e.what());
  }
}

Communicator::Communicator(std::shared_ptr<Watchdog> watchdog) : watchdog_(std::move(watchdog)) {
  LATTICE_CHECK(watchdog_ != nullptr, "a Communicator needs a watchdog");
}

std::vector<int> Communicator::other_world_ranks() const {
  std::vector<int> others;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) others.push_back(world_ranks()[static_cast<size_t>(r)]);
  }
  return others;
}

void Communicator::check_peer(int peer, const char* op, const char* what) const {
  if (peer < 0 || peer >= size()) {
    throw Error(fmt::format("{} on {}: {} {} is not a rank of this group (size {})", op, describe(), what, peer,
                            size()));
  }
}

void Communicator::check_blocks(const char* op, const Tensor& whole, const char* whole_name, const Tensor& block,
                                const char* block_name) const {
  if (whole.dtype() != block.dtype() || whole.numel() != block.numel() * size()) {
    throw Error(fmt::format("{} on {}: {} {} must have size {} × the {}'s {} elements and the same dtype", op,
                            describe(), whole_name, whole.describe(), size(), block_name, block.describe()));
  }
}

int64_t Communicator::check_all_to_all(const Tensor& in, const Tensor& out) const {
  if (in.dtype() != out.dtype() || in.numel() != out.numel() ||
      in.numel() % size() != 0) {
    throw Error(fmt::format("all_to_all on {}: input {} and output {} must have the same dtype and element count, "
                            "divisible by the group size {}",
                            describe(), in.describe(), out.describe(), size()));
  }
  const auto* a = static_cast<const char*>(in.raw());
  const auto* b = static_cast<const char*>(out.raw());
  if (in.device() == out.device() && a < b + out.bytes() && b < a + in.bytes())
    throw Error(fmt::format("all_to_all on {}: input {} and output {} share storage; all_to_all has no in-place form: "
                            "give it a separate output",
                            describe(), in.describe(), out.describe()));
  return in.numel() / size();
}

}  // namespace lattice
