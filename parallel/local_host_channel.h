// LocalHostChannel: the host control channel of a one-process group (no MPI): gathers and
// broadcasts are copies, so a one-process run takes the same code paths as a parallel one.
#pragma once

#include "parallel/host_channel.h"

namespace lattice {

class LocalHostChannel : public HostChannel {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

 protected:
  void all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view what) override;
  void broadcast_bytes(void* data, size_t bytes, int root, std::string_view what) override;
  void gather_bytes(const void* in, size_t bytes, const std::vector<size_t>& counts, void* out, int root,
                    std::string_view what) override;
};

}  // namespace lattice
