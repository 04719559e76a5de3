// PipelineLanes (see pipeline_lanes.h).
#include "parallel/pipeline_lanes.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

PipelineLanes::PipelineLanes(Communicator& pp, const DeviceContext& ctx) {
  const int p = pp.size(), r = pp.rank();
  LATTICE_CHECK(p >= 2, "pipeline lanes need a pp group of 2 or more ranks, not {}", p);
  // Edge k of a kind joins its sender (group rank 0) and receiver (group rank 1): activations go from
  // k to k + 1, gradients from k + 1 to k. Every rank makes the same splits in the same order, and
  // connects its lanes in that order too: each edge's two ranks meet there having connected every
  // earlier edge, so the rendezvous cannot wait in a cycle.
  const Tensor one = ctx.zeros(Shape{1});
  for (const bool grads : {false, true}) {
    for (int k = 0; k < p; ++k) {
      const int sender = grads ? (k + 1) % p : k, receiver = grads ? k : (k + 1) % p;
      const bool member = r == sender || r == receiver;
      const std::string name = fmt::format("pp {} {}->{}", grads ? "gradients" : "activations", sender, receiver);
      std::unique_ptr<Communicator> g =
          pp.split(member ? 0 : -1, r == sender ? 0 : 1, name, fmt::format("a lane of group '{}'", pp.name()));
      if (!member) continue;
      const P2pLane lane = r == sender ? (grads ? P2pLane::kSendGrad : P2pLane::kSendActivation)
                                       : (grads ? P2pLane::kRecvGrad : P2pLane::kRecvActivation);
      peers_[static_cast<size_t>(lane)] = r == sender ? 1 : 0;
      groups_[static_cast<size_t>(lane)] = std::move(g);
      transfer_async(r == sender ? (grads ? ActionType::kSendGrad : ActionType::kSendActivation)
                                 : (grads ? ActionType::kRecvGrad : ActionType::kRecvActivation),
                     one)
          .wait();
    }
  }
  for (int l = 0; l < kP2pLanes; ++l)
    LATTICE_CHECK(groups_[l] != nullptr, "pp rank {}: no group for the {} lane", r,
                  p2p_lane_name(static_cast<P2pLane>(l)));
}

CommHandle PipelineLanes::transfer_async(ActionType type, const Tensor& tensor) const {
  const auto lane = static_cast<size_t>(p2p_lane(type));
  Communicator& group = *groups_[lane];
  return is_send(type) ? group.send_async(tensor, peers_[lane]) : group.recv_async(tensor, peers_[lane]);
}

}  // namespace lattice
