// Activation slot assignment by walking an action list.
#include "parallel/activation_slots.h"

#include <algorithm>

#include "kernels/error.h"

namespace lattice {

ActivationSlots plan_activation_slots(const std::vector<Action>& actions, int v, int m) {
  LATTICE_CHECK(v >= 1 && m >= 1, "activation slots for {} chunks, {} micro-batches", v, m);
  ActivationSlots plan;
  plan.needed.assign(v, 1);
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
  std::vector<std::vector<char>> busy(v);  // per chunk, per slot: held by a micro-batch
  for (const Action& a : actions) {
    const int c = a.chunk, mb = a.microbatch;
    if (a.type == ActionType::kForward) {
      auto& b = busy[c];
      const auto free = std::find(b.begin(), b.end(), 0);
      const int s = static_cast<int>(free - b.begin());
      if (free == b.end()) b.push_back(1); else *free = 1;
      plan.slot[c][mb] = s;
      plan.needed[c] = std::max(plan.needed[c], static_cast<int>(b.size()));
      if (!has_backward[c][mb]) busy[c][s] = 0;
    } else if (a.type == ActionType::kBackward) {
      const int s = plan.slot[c][mb];
      LATTICE_CHECK(s >= 0, "{} before its forward", to_string(a));
      busy[c][s] = 0;
    }
  }
  return plan;
}

}  // namespace lattice
