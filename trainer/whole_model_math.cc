// Global mean loss and gradient norm with exact, ordered double reductions.
#include "trainer/whole_model_math.h"

#include <cmath>

#include "kernels/ops.h"
#include "parallel/exact_sum.h"
#include "trainer/step_readback.h"

namespace lattice {

double global_mean_loss(const Tensor& token_losses, int64_t global_tokens, const StepGroups& g) {
  const int last = g.pp->size() - 1;
  double mean = 0.0;
  if (g.pp->rank() == last) {
    const double local = read_mean_loss(token_losses) * static_cast<double>(token_losses.numel());
    mean = exact_sum(*g.dp, local) / static_cast<double>(global_tokens);
    mean = broadcast_double(*g.tp, mean, 0);
  }
  return broadcast_double(*g.pp, mean, last);
}

GradNorm::GradNorm(const ParameterStore& store, const DistributedOptimizer* dist, const StepGroups& groups)
    : store_(store), dist_(dist), groups_(groups) {
  int64_t offset = 0;
  for (const ParamSpec& s : store.specs()) {
    const int64_t n = shape_numel(s.shape);
    if (!s.replica) {
      if (!runs_.empty() && runs_.back().first + runs_.back().second == offset)
        runs_.back().second += n;
      else
        runs_.emplace_back(offset, n);
    }
    offset += n;
  }
}

double GradNorm::compute() const {
  double local = 0.0;
  if (dist_ != nullptr) {
    local = dist_->local_grad_sum_squares();
  } else {
    for (const auto& [offset, numel] : runs_)
      local += ops::sum_squares(store_.flat_grads().slice_flat(offset, {numel}));
  }
  double total = exact_sum(*groups_.pp, exact_sum(*groups_.tp, local));
  total = dist_ != nullptr ? exact_sum(*groups_.dp, total) : broadcast_double(*groups_.dp, total, 0);
  return std::sqrt(total);
}

}  // namespace lattice
