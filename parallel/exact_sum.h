// Host doubles over a group with the same bits on every rank: an ordered sum (all-gather of the
// exact values, added in group-rank order) and a broadcast. For the loss and the gradient norm,
// which every rank must agree on to the last bit (clipping, the non-finite check, the log). They
// travel on the group's host control channel, never through its tensors.
#pragma once

#include "parallel/communicator.h"

namespace lattice {

// Sum over the group of each rank's `local`, added in group-rank order (every rank the same bits).
double exact_sum(Communicator& group, double local);
// The root's `value` on every rank of the group.
double broadcast_double(Communicator& group, double value, int root);

}  // namespace lattice
