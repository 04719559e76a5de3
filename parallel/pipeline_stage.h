// PipelineStage: one model chunk (virtual stage) on this rank, as the pipeline executor sees it.
// Model-agnostic: the executor only moves activations and their gradients between stages.
#pragma once

#include "kernels/tensor.h"

namespace lattice {

// The stage owns whatever it must keep between forward(microbatch) and backward(microbatch)
// (saved activations, one set per micro-batch in flight: at most the schedule's
// max_inflight_bound), and accumulates its parameter gradients over micro-batches itself.
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // What flows between stages for one micro-batch (the same on every chunk of a rank).
  virtual Shape activation_shape() const = 0;
  virtual DType activation_dtype() const = 0;

  // First virtual stage: `input` is undefined (the stage reads micro-batch `microbatch` from its
  // data); otherwise `input` is the previous virtual stage's output. Last virtual stage: `output`
  // is undefined (the stage computes and keeps the loss); otherwise the stage writes
  // activation_shape() elements into `output` (storage owned by the executor). `input` is only
  // valid during the call: copy what backward needs.
  virtual void forward(int microbatch, const Tensor& input, Tensor& output) = 0;

  // Last virtual stage: `grad_output` is undefined (the gradient starts at the stage's own loss);
  // otherwise it is d loss / d output. First virtual stage: `grad_input` is undefined; otherwise
  // the stage writes d loss / d input into it. Backwards of one chunk come in forward order.
  virtual void backward(int microbatch, const Tensor& grad_output, Tensor& grad_input) = 0;
};

}  // namespace lattice
