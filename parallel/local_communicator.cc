// A one-process group: identities and copies.
#include "parallel/local_communicator.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

void copy_same(const Tensor& in, const Tensor& out, const char* op) {
  LATTICE_CHECK(in.numel() == out.numel() && in.dtype() == out.dtype(), "{} on one process: {} into {}", op,
                in.describe(), out.describe());
  if (in.numel() == 0 || in.raw() == out.raw()) return;
  Tensor dst = out;
  ops::copy(in, dst);
}

}  // namespace

LocalCommunicator::LocalCommunicator(std::string name, std::shared_ptr<Watchdog> watchdog)
    : Communicator(watchdog ? std::move(watchdog) : std::make_shared<Watchdog>()), name_(std::move(name)) {}

std::string LocalCommunicator::describe() const { return fmt::format("group '{}' (one process)", name_); }

CommHandle LocalCommunicator::all_reduce_async(const Tensor&, ReduceOp) { return {}; }
CommHandle LocalCommunicator::reduce_scatter_async(const Tensor& in, const Tensor& out) {
  copy_same(in, out, "reduce_scatter");
  return {};
}
CommHandle LocalCommunicator::all_gather_async(const Tensor& in, const Tensor& out) {
  copy_same(in, out, "all_gather");
  return {};
}
CommHandle LocalCommunicator::broadcast_async(const Tensor&, int root) {
  LATTICE_CHECK(root == 0, "broadcast from rank {} in a one-process group", root);
  return {};
}
CommHandle LocalCommunicator::send_async(const Tensor&, int dst, int) {
  throw Error(fmt::format("send to rank {} in the one-process group '{}'", dst, name_));
}
CommHandle LocalCommunicator::recv_async(const Tensor&, int src, int) {
  throw Error(fmt::format("receive from rank {} in the one-process group '{}'", src, name_));
}
CommHandle LocalCommunicator::all_to_all_async(const Tensor& in, const Tensor& out) {
  copy_same(in, out, "all_to_all");
  return {};
}
CommHandle LocalCommunicator::barrier_async() { return {}; }

std::unique_ptr<Communicator> LocalCommunicator::split(int color, int, std::string name, std::string) {
  if (color < 0) return nullptr;
  return std::make_unique<LocalCommunicator>(std::move(name), watchdog_ptr());
}

}  // namespace lattice
