// MpiHostChannel: the host control channel over an MPI communicator of its own (a duplicate of the
// group's), so that control messages never match a device-data collective of the same group.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/host_channel.h"
#include "parallel/watchdog.h"

namespace lattice {

class MpiHostChannel : public HostChannel {
 public:
  // Collective over `group` (MPI_Comm_dup). `describe` names the group in hang reports.
  // peers: the group's other world ranks (what a hung operation waits for).
  MpiHostChannel(MPI_Comm group, std::string describe, std::vector<int> peers,
                 std::shared_ptr<const Watchdog> watchdog);
  ~MpiHostChannel() override;
  MpiHostChannel(const MpiHostChannel&) = delete;
  MpiHostChannel& operator=(const MpiHostChannel&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

 protected:
  void all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view what) override;
  void broadcast_bytes(void* data, size_t bytes, int root, std::string_view what) override;
  void gather_bytes(const void* in, size_t bytes, const std::vector<size_t>& counts, void* out, int root,
                    std::string_view what) override;

 private:
  class Op;
  // Waits for `op` under the watchdog, then copies its result out.
  void finish(std::unique_ptr<Op> op, void* out) const;
  void check_root(int root, std::string_view what) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string describe_;
  std::vector<int> peers_;
  std::shared_ptr<const Watchdog> watchdog_;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
};

}  // namespace lattice
