// Activation slots for one pp rank's action list: which slot each micro-batch's saved activations
// use on each chunk, and how many slots there are (computed from the list, not from a formula).
// Chunks may share one pool of slots (interleaved schedules): the pool then holds the most
// micro-batches in flight on those chunks together, fewer than the sum of each chunk's own peak.
#pragma once

#include <string>
#include <vector>

#include "parallel/schedule.h"

namespace lattice {

struct ActivationSlots {
  // Per chunk: the most micro-batches between their Forward and Backward at once on it (at least 1).
  std::vector<int> needed;
  // Per chunk: its pool, named by the pool's first chunk (each chunk its own when not shared).
  std::vector<int> pool;
  // Per pool (indexed by its first chunk; 0 for an index that names no pool): the slots it holds,
  // the most micro-batches in flight on its chunks together (at least 1).
  std::vector<int> pool_slots;
  // slot[chunk][microbatch]: the slot of the chunk's pool the micro-batch's forward writes and its
  // backward reads; -1 when the chunk does not run that micro-batch.
  std::vector<std::vector<int>> slot;
  // Per chunk: the micro-batch of the chunk's last Backward in the list (-1 when it has none): when
  // that backward has produced a gradient, the gradient is final for the step.
  std::vector<int> last_backward;
};

// Simulates the list: a Forward takes the lowest free slot of its chunk's pool, the matching
// Backward frees it; a Forward without a Backward later in the list (a forward-only list) frees it
// at once. `pools` (per chunk, its pool's first chunk; empty: each chunk its own pool).
ActivationSlots plan_activation_slots(const std::vector<Action>& actions, int v, int m,
                                      const std::vector<int>& pools = {});

// Each pool's slots in chunk order, naming the chunks of a shared one: "11 (chunks 0-2) + 3".
std::string activation_slots_text(const std::vector<int>& pool, const std::vector<int>& pool_slots);

}  // namespace lattice
