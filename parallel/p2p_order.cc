// p2p_issue_order and check_ordered_p2p (see p2p_order.h).
#include "parallel/p2p_order.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

const char* p2p_lane_name(P2pLane lane) {
  switch (lane) {
    case P2pLane::kSendActivation: return "send-activation";
    case P2pLane::kRecvActivation: return "receive-activation";
    case P2pLane::kSendGrad: return "send-gradient";
    case P2pLane::kRecvGrad: return "receive-gradient";
  }
  return "?";
}

P2pLane p2p_lane(ActionType type) {
  switch (type) {
    case ActionType::kSendActivation: return P2pLane::kSendActivation;
    case ActionType::kRecvActivation: return P2pLane::kRecvActivation;
    case ActionType::kSendGrad: return P2pLane::kSendGrad;
    case ActionType::kRecvGrad: return P2pLane::kRecvGrad;
    default: break;
  }
  throw Error(fmt::format("p2p_lane: {} is no transfer", action_type_name(type)));
}

std::vector<P2pIssue> p2p_issue_order(const std::vector<Action>& actions, int pp_rank) {
  std::vector<P2pIssue> issues;
  int computes = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (is_compute(a.type)) {
      ++computes;
      continue;
    }
    if (a.peer == pp_rank) continue;  // a local hand-over
    const int after = is_send(a.type) ? computes - 1 : std::max(-1, computes - 2);
    issues.push_back(P2pIssue{after, p2p_lane(a.type), i});
  }
  // A receive listed after a send may be issued before it (one compute early).
  std::stable_sort(issues.begin(), issues.end(),
                   [](const P2pIssue& x, const P2pIssue& y) { return x.after_compute < y.after_compute; });
  return issues;
}

std::vector<size_t> p2p_host_order(const std::vector<Action>& actions, int pp_rank) {
  const std::vector<P2pIssue> issues = p2p_issue_order(actions, pp_rank);
  std::vector<size_t> order;
  size_t next = 0;
  auto issue_through = [&](int compute) {  // the transfers issued after compute number `compute`
    for (; next < issues.size() && issues[next].after_compute <= compute; ++next) order.push_back(issues[next].action);
  };
  issue_through(-1);
  int computes = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (!is_compute(actions[i].type)) continue;
    order.push_back(i);
    issue_through(computes++);
  }
  return order;
}

namespace {

// What a transfer carries, the same seen from either side: activation or gradient, micro-batch, and
// the virtual stage that receives it.
struct Payload {
  bool grad;
  int microbatch;
  int receiving_vs;
  bool operator==(const Payload&) const = default;
};

std::string payload_text(const Payload& x) {
  return fmt::format("{} of micro-batch {} for virtual stage {}", x.grad ? "gradient" : "activation", x.microbatch,
                     x.receiving_vs);
}

struct Transfer {
  P2pIssue issue;
  Action action;
  Payload payload;
  size_t position = 0;  // in its lane
  int counterpart_rank = -1, counterpart = -1;  // the other side: rank, index into its transfers
  bool complete = false;
};

struct RankState {
  std::vector<Transfer> transfers;              // in issue order
  std::vector<std::vector<int>> compute_needs;  // per compute of the list, the transfers holding its receives
  size_t computes_done = 0;
  // Per lane its transfers in order, and how many have started and completed (one at a time).
  std::vector<int> lane[kP2pLanes];
  size_t lane_started[kP2pLanes] = {}, lane_complete[kP2pLanes] = {};
  // One hardware queue: the computes (-1 - index) and transfers in host issue order, and its head.
  std::vector<int> queue;
  size_t queue_head = 0;

  bool started(int t) const {
    return transfers[t].position < lane_started[static_cast<int>(transfers[t].issue.lane)];
  }
};

}  // namespace

std::vector<std::string> check_ordered_p2p(const std::vector<std::vector<Action>>& schedules, P2pDeviceModel model) {
  const int p = static_cast<int>(schedules.size());
  std::vector<std::string> errors;
  std::vector<RankState> ranks(p);
  // Per edge (sender, receiver, gradients?), one lane on each side: the sends in issue order, and the
  // receives. Entries are (rank, transfer index).
  using Edge = std::tuple<int, int, bool>;
  std::map<Edge, std::vector<std::pair<int, int>>> sends, recvs;
  for (int r = 0; r < p; ++r) {
    RankState& s = ranks[r];
    const std::vector<Action>& list = schedules[r];
    std::map<size_t, int> transfer_of_action;
    for (const P2pIssue& issue : p2p_issue_order(list, r)) {
      const Action& a = list[issue.action];
      const int vs = virtual_stage(p, r, a.chunk);
      const bool grad = is_grad_transfer(a.type);
      const int receiving = is_send(a.type) ? (grad ? vs - 1 : vs + 1) : vs;
      const int t = static_cast<int>(s.transfers.size());
      std::vector<int>& lane = s.lane[static_cast<int>(issue.lane)];
      s.transfers.push_back(Transfer{issue, a, Payload{grad, a.microbatch, receiving}, lane.size()});
      lane.push_back(t);
      (is_send(a.type) ? sends[Edge{r, a.peer, grad}] : recvs[Edge{a.peer, r, grad}]).push_back({r, t});
      transfer_of_action[issue.action] = t;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (!is_compute(list[i].type)) continue;
      std::vector<int> needs;
      const ActionType input =
          list[i].type == ActionType::kForward ? ActionType::kRecvActivation : ActionType::kRecvGrad;
      for (size_t j = 0; j < i; ++j) {
        const Action& a = list[j];
        if (a.type == input && a.microbatch == list[i].microbatch && a.chunk == list[i].chunk &&
            transfer_of_action.count(j))
          needs.push_back(transfer_of_action[j]);
      }
      s.compute_needs.push_back(needs);
    }
    // The transfers are in issue order, so the k-th transfer of the host order is transfers[k].
    int next_transfer = 0, next_compute = 0;
    for (size_t i : p2p_host_order(list, r))
      s.queue.push_back(is_compute(list[i].type) ? -1 - next_compute++ : next_transfer++);
  }

  // The k-th send on an edge meets the k-th receive on it.
  auto pair_up = [&](const Edge& edge, const std::vector<std::pair<int, int>>& from,
                     const std::vector<std::pair<int, int>>& to) {
    const auto [sender, receiver, grads] = edge;
    const size_t n = std::min(from.size(), to.size());
    for (size_t k = 0; k < n; ++k) {
      Transfer& send = ranks[from[k].first].transfers[from[k].second];
      Transfer& recv = ranks[to[k].first].transfers[to[k].second];
      if (!(send.payload == recv.payload)) {
        errors.push_back(fmt::format("{} transfer {} from pp rank {} to {}: the sender's {} sends the {}, the "
                                     "receiver's {} expects the {}",
                                     grads ? "gradient" : "activation", k, sender, receiver, to_string(send.action),
                                     payload_text(send.payload), to_string(recv.action), payload_text(recv.payload)));
      }
      send.counterpart_rank = to[k].first;
      send.counterpart = to[k].second;
      recv.counterpart_rank = from[k].first;
      recv.counterpart = from[k].second;
    }
    for (size_t k = n; k < from.size(); ++k)
      errors.push_back(fmt::format("pp rank {}: {} has no receive on rank {}", sender,
                                   to_string(ranks[sender].transfers[from[k].second].action), receiver));
    for (size_t k = n; k < to.size(); ++k)
      errors.push_back(fmt::format("pp rank {}: {} has no send on rank {}", receiver,
                                   to_string(ranks[receiver].transfers[to[k].second].action), sender));
  };
  const std::vector<std::pair<int, int>> none;
  for (const auto& [edge, from] : sends) pair_up(edge, from, recvs.count(edge) ? recvs[edge] : none);
  for (const auto& [edge, to] : recvs)
    if (!sends.count(edge)) pair_up(edge, none, to);
  if (!errors.empty()) return errors;

  // Run the model to a fixed point.
  for (bool progress = true; progress;) {
    progress = false;
    for (RankState& s : ranks) {
      // The next compute runs once its receives completed; a lane's next transfer starts once the
      // lane's previous one completed and the compute before it ran.
      auto compute_ready = [&] {
        for (int t : s.compute_needs[s.computes_done])
          if (!s.transfers[t].complete) return false;
        return true;
      };
      auto transfer_ready = [&](int t) {
        const int l = static_cast<int>(s.transfers[t].issue.lane);
        return s.lane_started[l] == s.lane_complete[l] &&
               s.transfers[t].issue.after_compute < static_cast<int>(s.computes_done);
      };
      if (model == P2pDeviceModel::kOneHardwareQueue) {  // in host order; a head not ready holds the rest
        for (; s.queue_head < s.queue.size(); ++s.queue_head, progress = true) {
          const int item = s.queue[s.queue_head];
          if (item < 0 ? !compute_ready() : !transfer_ready(item)) break;
          if (item < 0) ++s.computes_done;
          else ++s.lane_started[static_cast<int>(s.transfers[item].issue.lane)];
        }
        continue;
      }
      for (; s.computes_done < s.compute_needs.size() && compute_ready(); progress = true) ++s.computes_done;
      for (int l = 0; l < kP2pLanes; ++l) {
        if (s.lane_started[l] < s.lane[l].size() && transfer_ready(s.lane[l][s.lane_started[l]])) {
          ++s.lane_started[l];
          progress = true;
        }
      }
    }
    // A transfer completes once both of its sides have started.
    for (RankState& s : ranks) {
      for (int l = 0; l < kP2pLanes; ++l) {
        if (s.lane_started[l] == s.lane_complete[l]) continue;
        Transfer& x = s.transfers[s.lane[l][s.lane_complete[l]]];
        if (!ranks[x.counterpart_rank].started(x.counterpart)) continue;
        x.complete = true;
        ++s.lane_complete[l];
        progress = true;
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    const RankState& s = ranks[r];
    std::string where;
    for (int l = 0; l < kP2pLanes; ++l) {
      if (s.lane_complete[l] == s.lane[l].size()) continue;
      const int t = s.lane[l][s.lane_complete[l]];
      where += fmt::format("; {} {} on its {} lane", s.started(t) ? "in" : "before", to_string(s.transfers[t].action),
                           p2p_lane_name(static_cast<P2pLane>(l)));
    }
    if (s.computes_done == s.compute_needs.size() && where.empty()) continue;
    if (s.queue_head < s.queue.size() && model == P2pDeviceModel::kOneHardwareQueue) {
      const int item = s.queue[s.queue_head];
      where += fmt::format("; its queue holds at {}", item < 0 ? fmt::format("compute {}", -1 - item)
                                                                : to_string(s.transfers[item].action));
    }
    errors.push_back(fmt::format("deadlock: pp rank {} stops after {} of {} computes{}", r, s.computes_done,
                                 s.compute_needs.size(), where));
  }
  return errors;
}

}  // namespace lattice
