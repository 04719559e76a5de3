// The optimizer's options from the config, and the global-norm clipping multiplier.
#include "trainer/optimizer.h"

#include <algorithm>

namespace lattice {

OptimizerOptions optimizer_options(const OptimizerConfig& config) {
  OptimizerOptions o;
  o.beta1 = config.beta1;
  o.beta2 = config.beta2;
  o.eps = config.eps;
  o.weight_decay = config.weight_decay;
  return o;
}

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace lattice
