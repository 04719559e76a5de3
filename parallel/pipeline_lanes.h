// PipelineLanes: the groups of the pipeline's four transfer lanes on an ordered transport
// (parallel/p2p_order.h). Each edge of the pp ring has a two-rank group of its own — rank k to k+1
// for activations and k+1 to k for gradients, both for k = p - 1 too (the wrap between the last rank
// and rank 0 that interleaving uses) — so that on NCCL each lane is its own communicator and stream:
// a rank's sends of activations, receives of activations, sends and receives of gradients never
// queue behind each other.
// The lanes are connected when they are made, by one transfer each in an order all ranks share:
// NCCL creates a point-to-point connection at the first transfer between two ranks, and that needs
// both ranks there at once (the host waits), a rendezvous the step's issue order is not proven for.
#pragma once

#include <array>
#include <memory>

#include "kernels/device_context.h"
#include "parallel/communicator.h"
#include "parallel/p2p_order.h"

namespace lattice {

class PipelineLanes {
 public:
  // Collective over `pp` (size >= 2): 2·p splits, every rank a member of four of them, each connected
  // with a one-element transfer on `ctx`'s device.
  PipelineLanes(Communicator& pp, const DeviceContext& ctx);

  // A send or receive (by the action's type) of `tensor` with the pp neighbour, on its lane's group;
  // tag 0 (the lanes are ordered: transfers match in issue order).
  CommHandle transfer_async(ActionType type, const Tensor& tensor) const;

 private:
  std::array<std::unique_ptr<Communicator>, kP2pLanes> groups_;
  std::array<int, kP2pLanes> peers_{};
};

}  // namespace lattice
