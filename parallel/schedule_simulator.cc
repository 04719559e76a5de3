// Simulated execution of all ranks' pipeline schedules (see schedule_simulator.h).
#include "parallel/schedule_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

std::string SimulationResult::error_text() const {
  std::string out;
  for (const std::string& e : errors) {
    if (!out.empty()) out += '\n';
    out += e;
  }
  return out;
}

namespace {

// A message is identified by what it carries (0 activation, 1 gradient), the micro-batch and the
// virtual stage it goes to.
using Key = std::tuple<int, int, int>;

struct Message {
  double time = 0;  // when it can be received
  int src_rank = 0;
  size_t src_index = 0;  // position of the send in the sender's list
};

struct RankState {
  size_t pc = 0;
  double clock = 0;
  double busy = 0;
  int64_t inflight = 0, peak = 0;
  // [chunk][microbatch] counters.
  std::vector<std::vector<int>> fwd, bwd, act_recv, grad_recv;
};

std::string key_text(const Key& k) {
  return fmt::format("{} of micro-batch {} for virtual stage {}",
                     std::get<0>(k) == 0 ? "activation" : "gradient", std::get<1>(k), std::get<2>(k));
}

class Simulator {
 public:
  Simulator(const std::vector<std::vector<Action>>& schedules, int v, int m,
            const SimulatorOptions& o)
      : lists_(schedules), p_(int(schedules.size())), v_(v), m_(m), opt_(o) {}

  SimulationResult run() {
    LATTICE_CHECK(p_ >= 1 && v_ >= 1 && m_ >= 1, "simulate_schedules needs p, v, m >= 1 (got {}, {}, {})",
                  p_, v_, m_);
    for (const auto* costs : {&opt_.chunk_forward_cost, &opt_.chunk_backward_cost}) {
      LATTICE_CHECK(costs->empty() || (int(costs->size()) == p_ &&
                                       std::all_of(costs->begin(), costs->end(),
                                                   [&](const std::vector<double>& c) { return int(c.size()) == v_; })),
                    "per-chunk costs must be p × v = {} × {}", p_, v_);
    }
    res_.busy.assign(p_, 0);
    res_.peak_inflight.assign(p_, 0);
    res_.timeline.assign(p_, {});
    st_.assign(p_, {});
    for (RankState& s : st_) {
      for (auto* t : {&s.fwd, &s.bwd, &s.act_recv, &s.grad_recv}) {
        t->assign(v_, std::vector<int>(m_, 0));
      }
    }
    while (true) {
      bool progress = false, all_done = true;
      for (int r = 0; r < p_; ++r) {
        while (st_[r].pc < lists_[r].size() && step(r)) progress = true;
        if (st_[r].pc < lists_[r].size()) all_done = false;
      }
      if (all_done) {
        res_.completed = true;
        break;
      }
      if (!progress) {
        explain_stuck();
        break;
      }
    }
    finish();
    return std::move(res_);
  }

 private:
  int stage(int r, int chunk) const { return virtual_stage(p_, r, chunk); }
  int last_stage() const { return p_ * v_ - 1; }

  void error(int r, size_t index, const std::string& what) {
    res_.errors.push_back(fmt::format("rank {} action #{} {}: {}", r, index,
                                      to_string(lists_[r][index]), what));
  }

  // The message a send/receive action at rank r is about, or nullopt for compute or for a
  // send/receive that has no neighbour in that direction.
  std::optional<Key> key_of(int r, const Action& a) const {
    const int s = stage(r, a.chunk);
    switch (a.type) {
      case ActionType::kSendActivation:
        if (s >= last_stage()) return std::nullopt;
        return Key{0, a.microbatch, s + 1};
      case ActionType::kRecvActivation:
        if (s <= 0) return std::nullopt;
        return Key{0, a.microbatch, s};
      case ActionType::kSendGrad:
        if (s <= 0) return std::nullopt;
        return Key{1, a.microbatch, s - 1};
      case ActionType::kRecvGrad:
        if (s >= last_stage()) return std::nullopt;
        return Key{1, a.microbatch, s};
      default: return std::nullopt;
    }
  }

  // Runs action pc of rank r if it can; returns false when the rank is blocked on a receive.
  bool step(int r) {
    RankState& S = st_[r];
    const size_t i = S.pc;
    const Action& a = lists_[r][i];
    if (a.microbatch < 0 || a.microbatch >= m_ || a.chunk < 0 || a.chunk >= v_ ||
        (!is_compute(a.type) && (a.peer < 0 || a.peer >= p_))) {
      error(r, i, fmt::format("field out of range (micro-batch in [0, {}), chunk in [0, {}), peer "
                              "in [0, {}))",
                              m_, v_, p_));
      ++S.pc;
      return true;
    }
    const int s = stage(r, a.chunk), c = a.chunk, mb = a.microbatch;
    const double v = v_;
    switch (a.type) {
      case ActionType::kForward: {
        if (s > 0 && S.act_recv[c][mb] == 0) {
          error(r, i, fmt::format("virtual stage {} runs the forward before receiving its input", s));
        }
        if (S.fwd[c][mb]++ > 0) error(r, i, "forward runs a second time");
        S.peak = std::max(S.peak, ++S.inflight);
        compute(r, a, opt_.chunk_forward_cost.empty() ? opt_.forward_cost / v : opt_.chunk_forward_cost[r][c]);
        break;
      }
      case ActionType::kBackward: {
        if (S.fwd[c][mb] == 0) error(r, i, "backward before its forward");
        if (s < last_stage() && S.grad_recv[c][mb] == 0) {
          error(r, i, fmt::format("virtual stage {} runs the backward before receiving its gradient", s));
        }
        if (S.bwd[c][mb]++ > 0) error(r, i, "backward runs a second time");
        if (S.fwd[c][mb] > 0 && S.bwd[c][mb] == 1) --S.inflight;
        compute(r, a, opt_.chunk_backward_cost.empty() ? opt_.backward_cost / v : opt_.chunk_backward_cost[r][c]);
        break;
      }
      case ActionType::kSendActivation:
      case ActionType::kSendGrad: {
        const bool act = a.type == ActionType::kSendActivation;
        const std::optional<Key> k = key_of(r, a);
        if (!k) {
          error(r, i, fmt::format("virtual stage {} has no {} stage to send to", s, act ? "next" : "previous"));
        } else {
          const int dest_rank = std::get<2>(*k) % p_;
          if (a.peer != dest_rank) {
            error(r, i, fmt::format("virtual stage {} lives on rank {}, not on peer {}",
                                    std::get<2>(*k), dest_rank, a.peer));
          }
          if ((act ? S.fwd : S.bwd)[c][mb] == 0) {
            error(r, i, fmt::format("sent before its {}", act ? "forward" : "backward"));
          }
          if (!sent_.insert(*k).second) {
            error(r, i, "the same message is sent a second time");
          } else {
            mailbox_[*k] = Message{S.clock + opt_.p2p_latency, r, i};
          }
        }
        res_.timeline[r].push_back({a, S.clock, S.clock});
        break;
      }
      case ActionType::kRecvActivation:
      case ActionType::kRecvGrad: {
        const bool act = a.type == ActionType::kRecvActivation;
        const std::optional<Key> k = key_of(r, a);
        if (!k) {
          error(r, i, fmt::format("virtual stage {} has no {} stage to receive from", s,
                                  act ? "previous" : "next"));
          res_.timeline[r].push_back({a, S.clock, S.clock});
          break;
        }
        auto it = mailbox_.find(*k);
        if (it == mailbox_.end()) return false;  // blocked: the send has not happened yet
        const Message msg = it->second;
        mailbox_.erase(it);
        if (a.peer != msg.src_rank) {
          error(r, i, fmt::format("the message comes from rank {}, not from peer {}", msg.src_rank, a.peer));
        }
        if ((act ? S.act_recv : S.grad_recv)[c][mb]++ > 0) error(r, i, "received a second time");
        const double start = S.clock;
        S.clock = std::max(S.clock, msg.time);
        res_.timeline[r].push_back({a, start, S.clock});
        break;
      }
    }
    ++S.pc;
    return true;
  }

  void compute(int r, const Action& a, double cost) {
    RankState& S = st_[r];
    res_.timeline[r].push_back({a, S.clock, S.clock + cost});
    S.clock += cost;
    S.busy += cost;
  }

  // Where, among the actions not yet run, the send of message k sits: (rank, index).
  std::optional<std::pair<int, size_t>> pending_send(const Key& k) const {
    for (int q = 0; q < p_; ++q) {
      for (size_t j = st_[q].pc; j < lists_[q].size(); ++j) {
        const Action& b = lists_[q][j];
        if (is_send(b.type) && key_of(q, b) == k) return std::pair{q, j};
      }
    }
    return std::nullopt;
  }

  bool pending_recv(const Key& k) const {
    for (int q = 0; q < p_; ++q) {
      for (size_t j = st_[q].pc; j < lists_[q].size(); ++j) {
        const Action& b = lists_[q][j];
        if (is_recv(b.type) && key_of(q, b) == k) return true;
      }
    }
    return false;
  }

  // No rank can progress: every unfinished rank waits on a receive. Name the cycles (deadlock)
  // and the receives whose send exists nowhere (unmatched).
  void explain_stuck() {
    std::vector<int> waits_on(p_, -1);  // rank holding the send this rank waits for
    std::vector<std::string> what(p_);
    for (int r = 0; r < p_; ++r) {
      const size_t i = st_[r].pc;
      if (i >= lists_[r].size()) continue;
      const Key k = *key_of(r, lists_[r][i]);
      const auto sender = pending_send(k);
      if (!sender) {
        error(r, i, fmt::format("unmatched receive: no rank ever sends the {}", key_text(k)));
        continue;
      }
      waits_on[r] = sender->first;
      what[r] = fmt::format("rank {} waits at #{} {} for rank {}'s #{} {}", r, i,
                            to_string(lists_[r][i]), sender->first, sender->second,
                            to_string(lists_[sender->first][sender->second]));
    }
    // Every blocked rank has at most one out-edge: walk from each rank to find the cycles.
    std::vector<int> color(p_, 0);  // 0 new, 1 on the current walk, 2 done
    for (int start = 0; start < p_; ++start) {
      std::vector<int> walk;
      int r = start;
      while (r >= 0 && color[r] == 0) {
        color[r] = 1;
        walk.push_back(r);
        r = waits_on[r];
      }
      if (r >= 0 && color[r] == 1) {  // a new cycle through r
        res_.deadlock = true;
        std::string text = "deadlock:";
        const auto from = std::find(walk.begin(), walk.end(), r);
        for (auto it = from; it != walk.end(); ++it) text += (it == from ? " " : "; ") + what[*it];
        res_.errors.push_back(text);
      }
      for (int q : walk) color[q] = 2;
    }
  }

  void finish() {
    double makespan = 0, busy = 0;
    for (int r = 0; r < p_; ++r) {
      makespan = std::max(makespan, st_[r].clock);
      busy += st_[r].busy;
      res_.busy[r] = st_[r].busy;
      res_.peak_inflight[r] = st_[r].peak;
    }
    res_.makespan = makespan;
    res_.bubble_fraction = makespan > 0 ? 1.0 - busy / (p_ * makespan) : 0.0;
    for (const auto& [k, msg] : mailbox_) {
      if (!pending_recv(k)) {
        error(msg.src_rank, msg.src_index,
              fmt::format("unmatched send: no rank ever receives the {}", key_text(k)));
      }
    }
    if (!res_.completed) return;
    for (int r = 0; r < p_; ++r) {
      for (int c = 0; c < v_; ++c) {
        for (int mb = 0; mb < m_; ++mb) {
          for (bool f : {true, false}) {
            if (!f && opt_.forward_only) continue;
            if ((f ? st_[r].fwd : st_[r].bwd)[c][mb] == 0) {
              res_.errors.push_back(fmt::format("rank {}: {} of micro-batch {} on chunk {} never runs",
                                                r, f ? "forward" : "backward", mb, c));
            }
          }
        }
      }
    }
  }

  const std::vector<std::vector<Action>>& lists_;
  const int p_, v_, m_;
  const SimulatorOptions opt_;
  std::vector<RankState> st_;
  std::map<Key, Message> mailbox_;  // sent, not yet received
  std::set<Key> sent_;              // every message ever sent
  SimulationResult res_;
};

}  // namespace

SimulationResult simulate_schedules(const std::vector<std::vector<Action>>& schedules, int v, int m,
                                    const SimulatorOptions& options) {
  return Simulator(schedules, v, m, options).run();
}

std::string render_timeline(const SimulationResult& result, int v, double unit,
                            const SimulatorOptions& options) {
  if (unit <= 0) unit = std::min(options.forward_cost, options.backward_cost) / v;
  LATTICE_CHECK(unit > 0, "render_timeline needs a positive time unit");
  auto label = [&](const Action& a) {
    const char t = a.type == ActionType::kForward ? 'F' : 'B';
    return v > 1 ? fmt::format("{}{}.{}", t, a.chunk, a.microbatch) : fmt::format("{}{}", t, a.microbatch);
  };
  const int64_t cells = int64_t(std::ceil(result.makespan / unit - 1e-9));
  size_t width = 1;
  for (const auto& row : result.timeline) {
    for (const TimedAction& t : row) {
      if (is_compute(t.action.type)) width = std::max(width, label(t.action).size());
    }
  }
  std::string out;
  for (size_t r = 0; r < result.timeline.size(); ++r) {
    std::vector<std::string> row(cells, std::string(width, '.'));
    for (const TimedAction& t : result.timeline[r]) {
      if (!is_compute(t.action.type)) continue;
      const int64_t a = std::llround(t.start / unit), b = std::llround(t.end / unit);
      for (int64_t x = std::max<int64_t>(a, 0); x < std::min(b, cells); ++x) {
        std::string l = label(t.action);
        row[x] = l + std::string(width - l.size(), ' ');
      }
    }
    out += fmt::format("rank {} |", r);
    for (const std::string& cell : row) out += cell + '|';
    out += '\n';
  }
  return out;
}

}  // namespace lattice
