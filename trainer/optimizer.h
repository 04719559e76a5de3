// AdamW over a ParameterStore (fp32 moments in the store's flat layout; decay only where
// ParamSpec::weight_decay) and the global-norm gradient clipping helpers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/adamw_runs.h"
#include "kernels/tensor.h"
#include "model/parameter_store.h"
#include "trainer/config.h"

namespace lattice {

class AdamW {
 public:
  // Allocates exp_avg / exp_avg_sq (zeros, same size and device as store.flat_grads()) once.
  // Uses config's beta1, beta2, eps and weight_decay; lr comes per step (see learning_rate()).
  AdamW(const ParameterStore& store, const OptimizerConfig& config);

  // One step: step_count() += 1, then every parameter gets
  //   ops::adamw_update(value, grad, m, v, {lr, beta1, beta2, eps, wd, step_count(), grad_scale})
  // with wd = config.weight_decay where ParamSpec::weight_decay, else 0. Contiguous runs of
  // parameters with the same decay flag are updated in one call. `store` must have the layout
  // this optimizer was built for.
  void step(ParameterStore& store, double lr, float grad_scale);

  // Number of steps taken (the bias-correction t of the last step); 0 before the first.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);  // checkpoint restore

  // Optimizer state in the flat-gradient layout (for checkpoints).
  Tensor& exp_avg() { return exp_avg_; }
  Tensor& exp_avg_sq() { return exp_avg_sq_; }
  const Tensor& exp_avg() const { return exp_avg_; }
  const Tensor& exp_avg_sq() const { return exp_avg_sq_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
  std::vector<AdamWRun> runs_;  // maximal runs of parameters sharing a decay flag, in flat order
  size_t param_count_;
  int64_t numel_;
  Tensor exp_avg_;
  Tensor exp_avg_sq_;
  int64_t step_count_ = 0;
};

// sqrt(sum of squares of every gradient element), accumulated in double (ops::sum_squares).
double global_grad_norm(const ParameterStore& store);

// Gradient multiplier for global-norm clipping: min(1, max_norm / (norm + 1e-6)); 1 when
// max_norm <= 0 (clipping off).
float clip_scale(double norm, double max_norm);

}  // namespace lattice
