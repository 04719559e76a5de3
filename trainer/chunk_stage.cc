// ModelChunk behind the PipelineStage interface.
#include "trainer/chunk_stage.h"

#include "kernels/error.h"

namespace lattice {

ChunkStage::ChunkStage(ModelChunk& chunk, StepBatches& batches, GradsReady grads_ready, ParamsNeeded params_needed)
    : chunk_(chunk), batches_(batches), grads_ready_(std::move(grads_ready)) {
  chunk_.set_grads_done_hook([this](const std::vector<size_t>& indices) {
    if (final_backward_ && grads_ready_) grads_ready_(indices);
  });
  chunk_.set_params_needed_hook(std::move(params_needed));
}

void ChunkStage::begin_run(const std::vector<int>& slots, int last_backward, Tensor losses,
                           std::optional<float> grad_scale) {
  for (int s : slots)
    LATTICE_CHECK(s < chunk_.slots(), "the action list needs activation slot {} but the chunk has {}", s,
                  chunk_.slots());
  slots_ = slots;
  last_backward_ = last_backward;
  losses_ = std::move(losses);
  grad_scale_ = grad_scale;
}

int ChunkStage::slot_of(int microbatch) const {
  LATTICE_CHECK(microbatch >= 0 && microbatch < static_cast<int>(slots_.size()) && slots_[microbatch] >= 0,
                "micro-batch {} has no activation slot on this chunk", microbatch);
  return slots_[microbatch];
}

void ChunkStage::forward(int microbatch, const Tensor& input, Tensor& output) {
  const int slot = slot_of(microbatch);
  const Tensor& ids = chunk_.has_embedding() ? batches_.ids(microbatch) : none_;
  const Tensor& targets = chunk_.has_head() ? batches_.targets(microbatch) : none_;
  Tensor losses;
  if (chunk_.has_head()) {
    const int64_t n = targets.numel();
    LATTICE_CHECK(losses_.numel() >= (microbatch + 1) * n, "loss buffer {} too small for micro-batch {}",
                  losses_.describe(), microbatch);
    losses = losses_.slice_flat(microbatch * n, {n});
  }
  chunk_.forward(slot, ids, targets, input, output, losses, grad_scale_);
}

void ChunkStage::backward(int microbatch, const Tensor& grad_output, Tensor& grad_input) {
  const int slot = slot_of(microbatch);
  const Tensor& ids = chunk_.has_embedding() ? batches_.ids(microbatch) : none_;
  const Tensor& targets = chunk_.has_head() ? batches_.targets(microbatch) : none_;
  LATTICE_CHECK(grad_scale_.has_value(), "micro-batch {}: a backward in a run of forwards alone", microbatch);
  final_backward_ = microbatch == last_backward_;
  chunk_.backward(slot, ids, targets, grad_output, *grad_scale_, grad_input);
  final_backward_ = false;
}

}  // namespace lattice
