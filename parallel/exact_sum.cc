// Ordered double sums and broadcasts on the group's host control channel.
#include "parallel/exact_sum.h"

namespace lattice {

double exact_sum(Communicator& group, double local) {
  if (group.size() == 1) return local;
  double total = 0.0;
  for (double part : group.host().all_gather(local, "exact double sum")) total += part;
  return total;
}

double broadcast_double(Communicator& group, double value, int root) {
  if (group.size() == 1) return value;
  return group.host().broadcast(value, root, "double broadcast");
}

}  // namespace lattice
