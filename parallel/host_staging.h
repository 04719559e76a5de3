// HostStaging: host copies of device tensors for a transport that only reads and writes host
// memory (MPI without CUDA awareness). Host tensors pass through untouched.
#pragma once

#include <utility>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

// One per operation: it owns the staging buffers, so they live as long as the operation does.
// The buffers are plain pageable host tensors: the backend's copy_to_host/copy_from_host stage
// through pinned memory themselves. Pinning these buffers (or pooling them per communicator) would
// save that second copy; not done yet.
class HostStaging {
 public:
  // What the transport reads for `t`: t itself on the host (no copy); otherwise a host copy of t's
  // value now, so the operation sends what t held at the call.
  Tensor input(const Tensor& t);
  // What the transport writes for `t`: t itself on the host; otherwise a host buffer that finish()
  // copies into t. copy_in: the buffer starts as a copy of t (in-place operations: all_reduce, and
  // broadcast, whose root sends it).
  Tensor output(const Tensor& t, bool copy_in);
  // Copies every staged output into its device tensor. Call once, after the transport completed.
  void finish();

  bool empty() const { return outputs_.empty(); }

 private:
  std::vector<std::pair<Tensor, Tensor>> outputs_;  // (host buffer, device tensor)
};

}  // namespace lattice
