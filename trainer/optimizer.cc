// AdamW over the ParameterStore's flat buffers, and global-norm clipping helpers.
#include "trainer/optimizer.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

AdamW::AdamW(const ParameterStore& store, const OptimizerConfig& config)
    : config_(config), param_count_(store.count()), numel_(store.numel()) {
  // Same layout as ParameterStore: parameter i occupies the next numel(i) flat elements.
  int64_t offset = 0;
  for (const ParamSpec& s : store.specs()) {
    const int64_t n = shape_numel(s.shape);
    if (!runs_.empty() && runs_.back().decay == s.weight_decay) {
      runs_.back().numel += n;
    } else {
      runs_.push_back({offset, n, s.weight_decay});
    }
    offset += n;
  }
  LATTICE_CHECK(offset == numel_, "AdamW: parameter specs cover {} elements but the store holds {}", offset,
                numel_);
  const Device device = store.count() > 0 ? store.grad(0).device() : Device::kCpu;
  exp_avg_ = Tensor::zeros({numel_}, DType::kF32, device);
  exp_avg_sq_ = Tensor::zeros({numel_}, DType::kF32, device);
}

void AdamW::set_step_count(int64_t steps) {
  LATTICE_CHECK(steps >= 0, "AdamW: negative step count {}", steps);
  step_count_ = steps;
}

void AdamW::step(ParameterStore& store, double lr, float grad_scale) {
  LATTICE_CHECK(store.count() == param_count_ && store.numel() == numel_,
                "AdamW: built for {} parameters / {} elements, stepped with {} / {}", param_count_, numel_,
                store.count(), store.numel());
  ++step_count_;
  adamw_update_runs(store.flat_values(), store.flat_grads(), exp_avg_, exp_avg_sq_, runs_,
                    {config_.beta1, config_.beta2, config_.eps, config_.weight_decay}, lr, step_count_, grad_scale);
}

double global_grad_norm(const ParameterStore& store) {
  if (store.numel() == 0) return 0.0;
  const Tensor& grads = store.flat_grads();
  return std::sqrt(ops::sum_squares(grads));
}

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace lattice
