// Pipeline point-to-point on an ordered transport (NCCL): no tags, so the sends and receives between
// two ranks on one communicator match in the order each side issues them, and a communicator runs
// its operations one after another on its stream; a send may wait for its receiver (nothing is
// buffered). With a rank's transfers on one communicator, a send waiting for its receiver holds up
// the receives queued behind it: grouping the transfers between two computes into one call there
// deadlocks the interleaved schedule when m > p (check_ordered_p2p found the cycles while this was
// built). So the transfers go on four lanes, each its own communicator and stream
// (PipelineLanes): a rank's sends of activations, receives of activations, sends of gradients and
// receives of gradients. Each transfer is one call on its lane, in list order: a send right after
// the compute that produced it, a receive one compute before the one that consumes it (so that it
// overlaps that compute). No two transfers share a call (a group): a compute waits for its own
// receive only, not for one that another rank can send only after this compute.
// check_ordered_p2p proves, for all ranks' lists together, that this matches every transfer to its
// counterpart and cannot deadlock, in two models of how the GPU runs the streams (P2pDeviceModel);
// tests/parallel/p2p_order_test runs it on every schedule in both.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "parallel/schedule.h"

namespace lattice {

enum class P2pLane { kSendActivation, kRecvActivation, kSendGrad, kRecvGrad };
inline constexpr int kP2pLanes = 4;
const char* p2p_lane_name(P2pLane lane);  // "send-activation", ...
P2pLane p2p_lane(ActionType type);         // a send or receive's lane

struct P2pIssue {
  int after_compute = -1;  // issued after the list's compute number (from 0); -1: before the first
  P2pLane lane = P2pLane::kSendActivation;
  size_t action = 0;  // index into the list
};

// One rank's transfers in issue order (by after_compute, then list order). Sends and receives with
// this rank as the peer (p == 1, v > 1: handed over locally) are left out: they are no transfer.
std::vector<P2pIssue> p2p_issue_order(const std::vector<Action>& actions, int pp_rank);

// The same rank's computes and transfers, as indices into the list, in the order its host issues
// them (the order the executor runs them in, and what one hardware queue sees): each compute
// followed by the transfers issued after it, the transfers issued before the first compute first.
std::vector<size_t> p2p_host_order(const std::vector<Action>& actions, int pp_rank);

// How a rank's GPU runs its compute stream and the lanes' streams. Several communicators on one
// device are safe only if no rank's device can wait for work that another's holds back (NCCL's
// "using multiple communicators concurrently"); the two models bound how much the device reorders.
enum class P2pDeviceModel {
  // Each stream progresses on its own: the lanes' kernels run side by side with compute.
  kConcurrentStreams,
  // All streams' work goes through one hardware queue in host issue order, and a head that cannot
  // start (a transfer whose lane is busy, a compute whose receive is incomplete) holds back all
  // behind it; a transfer that has started runs beside what follows. This is the device under
  // CUDA_DEVICE_MAX_CONNECTIONS=1 (one work queue for all streams; Megatron-LM's users export it),
  // and NCCL_LAUNCH_ORDER_IMPLICIT=1 orders NCCL's launches by host issue order too.
  kOneHardwareQueue,
};
// Neither model is a device that runs one kernel at a time (no overlap of any kind survives that).
// The data- and tensor-parallel collectives are not in the lists, and need not be: the members of
// such a group are the same pp rank of pipelines that run the same lists, so in either model they
// reach each collective in the same state, and it completes as each starts it, holding nothing back.

// Runs all ranks' lists (schedules[r] is pp rank r's) issued in p2p_issue_order, in a model of
// NCCL's semantics: per rank one compute stream and one stream per lane; a lane's transfer starts
// once the compute before it has run and the lane's previous transfer has completed; a transfer
// completes once both its sides have started; a compute runs once its receives have completed;
// with kOneHardwareQueue, additionally in host issue order.
// Returns every problem, in words (empty: all transfers matched and everything completed): the k-th
// send on an edge (sender, receiver, activations or gradients) that is not what the k-th receive on
// it expects, transfers without a counterpart, and, when the ranks stop progressing, where each
// stuck rank waits.
std::vector<std::string> check_ordered_p2p(const std::vector<std::vector<Action>>& schedules,
                                           P2pDeviceModel model = P2pDeviceModel::kConcurrentStreams);

}  // namespace lattice
