// The flat parameter and gradient buffers and their per-parameter views.
#include "parallel/param_grad_buffer.h"

#include "kernels/ops.h"

namespace lattice {

ParamGradBuffer::ParamGradBuffer(std::vector<ParamSpec> specs, DType param_dtype, const DeviceContext& ctx)
    : ParamLayout(std::move(specs)),
      ctx_(&ctx),
      flat_values_(ctx.zeros({numel()}, param_dtype)),
      flat_grads_(ctx.zeros({numel()}, DType::kF32)) {
  for (size_t i = 0; i < count(); ++i) {
    values_.push_back(flat_values_.slice_flat(offset(i), spec(i).shape));
    grads_.push_back(flat_grads_.slice_flat(offset(i), spec(i).shape));
  }
}

void ParamGradBuffer::zero_grads() { ops::fill(flat_grads_, 0.0f); }

}  // namespace lattice
