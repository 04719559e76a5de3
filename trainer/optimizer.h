// The trainer's side of the optimizer (parallel/optimizer.h owns the fp32 main parameters and
// steps them): its options from the config, and the global-norm gradient clipping multiplier.
#pragma once

#include "parallel/optimizer.h"
#include "trainer/config.h"

namespace lattice {

// config's beta1, beta2, eps and weight_decay (overlap_param_gather off: a parallel setting).
OptimizerOptions optimizer_options(const OptimizerConfig& config);

// Gradient multiplier for global-norm clipping: min(1, max_norm / (norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off).
float clip_scale(double norm, double max_norm);

}  // namespace lattice
