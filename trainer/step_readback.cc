// The step's device reductions into f64 slots, their one host copy, and the host figures from them.
#include "trainer/step_readback.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

StepReadback::StepReadback(const DeviceContext& ctx, int64_t loss_slots, int64_t grad_slots)
    : ctx_(ctx),
      loss_slots_(loss_slots),
      device_(ctx.zeros({loss_slots + grad_slots}, DType::kF64)),
      host_(Tensor::zeros({loss_slots + grad_slots}, DType::kF64)),
      loss_tokens_(static_cast<size_t>(loss_slots), 0) {}

void StepReadback::enqueue_loss_sum(int64_t i, const Tensor& token_losses) {
  LATTICE_CHECK(i >= 0 && i < loss_slots_, "StepReadback: loss slot {} of {}", i, loss_slots_);
  ops::sum_to(token_losses, device_, i);
  loss_tokens_[static_cast<size_t>(i)] = token_losses.numel();
}

void StepReadback::enqueue_grad_sum_squares(const std::vector<Tensor>& grads) {
  const int64_t grad_slots = device_.numel() - loss_slots_;
  LATTICE_CHECK(static_cast<int64_t>(grads.size()) == grad_slots, "StepReadback: {} gradient views for {} slots",
                grads.size(), grad_slots);
  for (int64_t k = 0; k < grad_slots; ++k) ops::sum_squares_to(grads[static_cast<size_t>(k)], device_, loss_slots_ + k);
}

void StepReadback::read() { ctx_.copy_to_host(device_, host_); }

double StepReadback::loss_sum(int64_t i) const {
  LATTICE_CHECK(i >= 0 && i < loss_slots_, "StepReadback: loss slot {} of {}", i, loss_slots_);
  const int64_t n = loss_tokens_[static_cast<size_t>(i)];
  if (n == 0) return 0.0;
  return host_.f64()[i] / static_cast<double>(n) * static_cast<double>(n);
}

double StepReadback::grad_sum_squares() const {
  double sum = 0.0;
  for (int64_t k = loss_slots_; k < host_.numel(); ++k) sum += host_.f64()[k];
  return sum;
}

std::vector<float> read_logits_row(const Tensor& logits, int64_t row, int64_t columns) {
  LATTICE_CHECK(logits.device() == Device::kCpu, "logits read-back from {} not built", logits.describe());
  LATTICE_CHECK(logits.rank() == 2 && row >= 0 && row < logits.dim(0) && columns >= 0 && columns <= logits.dim(1),
                "logits row {} columns [0, {}) outside {}", row, columns, logits.describe());
  Tensor widened = Tensor::empty({columns});  // bf16 logits (mixed precision) widen exactly
  ops::cast(logits.slice_flat(row * logits.dim(1), {columns}), widened);
  return std::vector<float>(widened.f32(), widened.f32() + columns);
}

}  // namespace lattice
