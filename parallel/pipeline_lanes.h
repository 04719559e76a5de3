// PipelineLanes: the groups of the pipeline's four transfer lanes on an ordered transport
// (parallel/p2p_order.h). Each edge of the pp ring has a two-rank group of its own — rank k to k+1
// for activations and k+1 to k for gradients, both for k = p - 1 too (the wrap between the last rank
// and rank 0 that interleaving uses) — so that on NCCL each lane is its own communicator and stream:
// a rank's sends of activations, receives of activations, sends and receives of gradients never
// queue behind each other.
#pragma once

#include <array>
#include <memory>

#include "parallel/communicator.h"
#include "parallel/p2p_order.h"

namespace lattice {

class PipelineLanes {
 public:
  // Collective over `pp` (size >= 2): 2·p splits, every rank a member of four of them.
  explicit PipelineLanes(Communicator& pp);

  // A send or receive (by the action's type) of `tensor` with the pp neighbour, on its lane's group;
  // tag 0 (the lanes are ordered: transfers match in issue order).
  CommHandle transfer_async(ActionType type, const Tensor& tensor) const;

 private:
  std::array<std::unique_ptr<Communicator>, kP2pLanes> groups_;
  std::array<int, kP2pLanes> peers_{};
};

}  // namespace lattice
