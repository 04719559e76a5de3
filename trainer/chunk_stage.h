// ChunkStage: a ModelChunk as the pipeline executor's PipelineStage. It takes the micro-batch's
// tokens from StepBatches where the chunk needs them, maps micro-batches to the chunk's activation
// slots (planned from the action list), writes the last stage's token losses into the step's loss
// buffer, and passes on the gradients that backward finishes on the chunk's last micro-batch.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "kernels/tensor.h"
#include "model/model_chunk.h"
#include "parallel/pipeline_stage.h"
#include "trainer/step_batches.h"

namespace lattice {

class ChunkStage final : public PipelineStage {
 public:
  using GradsReady = std::function<void(const std::vector<size_t>& param_indices)>;

  using ParamsNeeded = std::function<void(const std::vector<size_t>& param_indices)>;

  // `chunk` and `batches` must outlive this stage. `grads_ready` is called during the backward of
  // the run's last micro-batch on this chunk, each time a component's gradients are final;
  // `params_needed` (may be empty) before each component's forward reads its parameters.
  ChunkStage(ModelChunk& chunk, StepBatches& batches, GradsReady grads_ready, ParamsNeeded params_needed = {});

  // Before each executor run: slot[microbatch] of this chunk (ActivationSlots::slot[chunk]), the
  // micro-batch whose backward finishes the gradients (-1: none, e.g. evaluation), the loss buffer
  // f32[micro-batches × B·T] (head chunk only) and the backward's loss scale (none: a run of
  // forwards alone, e.g. evaluation).
  void begin_run(const std::vector<int>& slots, int last_backward, Tensor losses, std::optional<float> grad_scale);

  Shape activation_shape() const override { return chunk_.activation_shape(); }
  DType activation_dtype() const override { return chunk_.activation_dtype(); }
  void forward(int microbatch, const Tensor& input, Tensor& output) override;
  void backward(int microbatch, const Tensor& grad_output, Tensor& grad_input) override;

 private:
  int slot_of(int microbatch) const;

  ModelChunk& chunk_;
  StepBatches& batches_;
  GradsReady grads_ready_;
  std::vector<int> slots_;
  int last_backward_ = -1;
  bool final_backward_ = false;  // inside the backward of last_backward_
  Tensor losses_;
  std::optional<float> grad_scale_;
  Tensor none_;  // ids/targets/losses of a chunk that does not need them
};

}  // namespace lattice
