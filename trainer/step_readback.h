// The one place per step where device values come back to the host: the loss and gradient sums,
// reduced on the device into slots and read in one copy; and, when sampling text, a logits row.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/tensor.h"

namespace lattice {

// f64 slots on the device and their host mirror: `loss_slots` token-loss sums (one per training
// step, or one per iteration of an evaluation pass), then `grad_slots` gradient sums of squares.
// Reductions are enqueued on the device's stream; read() is the one device -> host copy.
class StepReadback {
 public:
  // `ctx` (the device of the tensors reduced) must outlive this.
  StepReadback(const DeviceContext& ctx, int64_t loss_slots, int64_t grad_slots);

  // Loss slot i = the sum of `token_losses` (f32), left to right in double.
  void enqueue_loss_sum(int64_t i, const Tensor& token_losses);
  // The gradient slots = the sums of squares of `grads` (grad_slots views, in order).
  void enqueue_grad_sum_squares(const std::vector<Tensor>& grads);
  // Copies every slot to the host; the values below are those of the last read().
  void read();

  // Loss slot i as the mean times the token count, (sum / n) · n, not the sum itself: the order the
  // reference losses were computed in (bit-identical runs). 0 with no tokens or nothing enqueued.
  double loss_sum(int64_t i) const;
  // The gradient slots added from 0.0 in order.
  double grad_sum_squares() const;

 private:
  const DeviceContext& ctx_;
  int64_t loss_slots_;
  Tensor device_;  // f64[loss_slots + grad_slots] on ctx_'s device
  Tensor host_;    // its host mirror
  std::vector<int64_t> loss_tokens_;  // token count behind each loss slot
};

// The first `columns` values of row `row` of logits f32[N, V] (generation: the next token's row).
std::vector<float> read_logits_row(const Tensor& logits, int64_t row, int64_t columns);

}  // namespace lattice
