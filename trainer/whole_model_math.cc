// Global mean loss and gradient norm with exact, ordered double reductions.
#include "trainer/whole_model_math.h"

#include <cmath>

#include "parallel/exact_sum.h"

namespace lattice {

double global_mean_loss(double local_loss_sum, int64_t global_tokens, const StepGroups& g) {
  const int last = g.pp->size() - 1;
  double mean = 0.0;
  if (g.pp->rank() == last) {
    mean = exact_sum(*g.dp, local_loss_sum) / static_cast<double>(global_tokens);
    mean = broadcast_double(*g.tp, mean, 0);
  }
  return broadcast_double(*g.pp, mean, last);
}

GradNorm::GradNorm(const Optimizer& optimizer, const StepGroups& groups) : optimizer_(optimizer), groups_(groups) {}

double GradNorm::compute(double local_sum_squares) const {
  double total = exact_sum(*groups_.pp, exact_sum(*groups_.tp, local_sum_squares));
  total = optimizer_.sharded() ? exact_sum(*groups_.dp, total) : broadcast_double(*groups_.dp, total, 0);
  return std::sqrt(total);
}

}  // namespace lattice
