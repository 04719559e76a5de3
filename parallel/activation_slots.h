// Activation slots for one pp rank's action list: which slot of its chunk each micro-batch's saved
// activations use, and how many slots each chunk needs (computed from the list, not from a formula).
#pragma once

#include <vector>

#include "parallel/schedule.h"

namespace lattice {

struct ActivationSlots {
  // Per chunk: the most micro-batches between their Forward and Backward at once (at least 1).
  std::vector<int> needed;
  // slot[chunk][microbatch]: the slot the micro-batch's forward writes and its backward reads; -1
  // when the chunk does not run that micro-batch.
  std::vector<std::vector<int>> slot;
  // Per chunk: the micro-batch of the chunk's last Backward in the list (-1 when it has none): when
  // that backward has produced a gradient, the gradient is final for the step.
  std::vector<int> last_backward;
};

// Simulates the list: a Forward takes the lowest free slot of its chunk, the matching Backward frees
// it; a Forward without a Backward later in the list (a forward-only list) frees it at once.
ActivationSlots plan_activation_slots(const std::vector<Action>& actions, int v, int m);

}  // namespace lattice
