// Activation slot assignment by walking an action list.
#include "parallel/activation_slots.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/error.h"

namespace lattice {

ActivationSlots plan_activation_slots(const std::vector<Action>& actions, int v, int m, const std::vector<int>& pools) {
  LATTICE_CHECK(v >= 1 && m >= 1, "activation slots for {} chunks, {} micro-batches", v, m);
  ActivationSlots plan;
  plan.needed.assign(v, 1);
  plan.pool.resize(v);
  for (int c = 0; c < v; ++c) {
    plan.pool[c] = pools.empty() ? c : pools[c];
    LATTICE_CHECK(plan.pool[c] >= 0 && plan.pool[c] <= c && (pools.empty() || pools[plan.pool[c]] == plan.pool[c]),
                  "chunk {}'s pool {} is not named by its first chunk", c, plan.pool[c]);
  }
  plan.pool_slots.assign(v, 0);
  for (int c = 0; c < v; ++c) plan.pool_slots[plan.pool[c]] = 1;
  plan.slot.assign(v, std::vector<int>(m, -1));
  plan.last_backward.assign(v, -1);
  std::vector<std::vector<char>> has_backward(v, std::vector<char>(m, 0));
  for (const Action& a : actions) {
    LATTICE_CHECK(a.chunk >= 0 && a.chunk < v && a.microbatch >= 0 && a.microbatch < m,
                  "action {} outside {} chunks × {} micro-batches", to_string(a), v, m);
    if (a.type == ActionType::kBackward) {
      has_backward[a.chunk][a.microbatch] = 1;
      plan.last_backward[a.chunk] = a.microbatch;
    }
  }
  std::vector<std::vector<char>> busy(v);  // per pool, per slot: held by a micro-batch
  std::vector<int> held(v, 0);             // per chunk: micro-batches between forward and backward
  for (const Action& a : actions) {
    const int c = a.chunk, mb = a.microbatch;
    auto& b = busy[plan.pool[c]];
    if (a.type == ActionType::kForward) {
      const auto free = std::find(b.begin(), b.end(), 0);
      const int s = static_cast<int>(free - b.begin());
      if (free == b.end()) b.push_back(1); else *free = 1;
      plan.slot[c][mb] = s;
      plan.pool_slots[plan.pool[c]] = std::max(plan.pool_slots[plan.pool[c]], static_cast<int>(b.size()));
      plan.needed[c] = std::max(plan.needed[c], ++held[c]);
      if (!has_backward[c][mb]) {
        b[s] = 0;
        --held[c];
      }
    } else if (a.type == ActionType::kBackward) {
      const int s = plan.slot[c][mb];
      LATTICE_CHECK(s >= 0, "{} before its forward", to_string(a));
      b[s] = 0;
      --held[c];
    }
  }
  return plan;
}

std::string activation_slots_text(const std::vector<int>& pool, const std::vector<int>& pool_slots) {
  std::string text;
  for (size_t c = 0; c < pool.size(); ++c) {
    if (pool[c] != static_cast<int>(c)) continue;
    std::vector<size_t> members;
    for (size_t d = c; d < pool.size(); ++d)
      if (pool[d] == static_cast<int>(c)) members.push_back(d);
    text += fmt::format("{}{}", text.empty() ? "" : " + ", pool_slots[c]);
    if (members.size() > 1) {
      const bool run = members.back() - members.front() + 1 == members.size();
      text += run ? fmt::format(" (chunks {}-{})", members.front(), members.back())
                  : fmt::format(" (chunks {})", fmt::join(members, ", "));
    }
  }
  return text;
}

}  // namespace lattice
