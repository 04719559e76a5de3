// Megatron-style warmup + decay learning-rate schedule.
#include "trainer/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "kernels/error.h"

namespace lattice {

double learning_rate(const OptimizerConfig& config, int64_t train_iters, int64_t step) {
  LATTICE_CHECK(step >= 0, "learning_rate: negative step {}", step);
  const int64_t warmup = config.warmup_iters;
  if (warmup > 0 && step <= warmup) {
    return config.lr * static_cast<double>(step) / static_cast<double>(warmup);
  }
  if (config.decay == DecayStyle::kConstant) return config.lr;

  const int64_t decay_end = config.decay_iters > 0 ? config.decay_iters : train_iters;
  if (step >= decay_end) return config.min_lr;
  // Here max(warmup, 0) <= step < decay_end, so the span below is positive.
  const int64_t start = warmup > 0 ? warmup : 0;
  const double progress = static_cast<double>(step - start) / static_cast<double>(decay_end - start);
  double coeff = 0.0;
  switch (config.decay) {
    case DecayStyle::kCosine: coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress)); break;
    case DecayStyle::kLinear: coeff = 1.0 - progress; break;
    case DecayStyle::kConstant: coeff = 1.0; break;
  }
  return config.min_lr + coeff * (config.lr - config.min_lr);
}

}  // namespace lattice
