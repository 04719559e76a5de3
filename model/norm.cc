// Norm layer: dispatches to the LayerNorm or RMSNorm kernels.
#include "model/norm.h"

#include "kernels/ops.h"

namespace lattice {

void NormSaved::allocate(const DeviceContext& ctx, int64_t rows) {
  mean = ctx.empty({rows});
  rstd = ctx.empty({rows});
}

Norm::Norm(ParameterStore& params, const std::string& prefix, NormKind kind, float eps)
    : kind_(kind), eps_(eps), gain_(params.value(prefix + ".weight")), gain_grad_(params.grad(prefix + ".weight")) {
  if (params.contains(prefix + ".bias")) {
    bias_ = params.value(prefix + ".bias");
    bias_grad_ = params.grad(prefix + ".bias");
  }
}

void Norm::forward(const Tensor& x, Tensor& y, NormSaved& saved) const {
  if (kind_ == NormKind::kLayerNorm) {
    ops::layernorm_forward(x, gain_, bias_, eps_, y, saved.mean, saved.rstd);
  } else {
    ops::rmsnorm_forward(x, gain_, eps_, y, saved.rstd);
  }
}

void Norm::backward(const Tensor& dy, const Tensor& x, const NormSaved& saved, Tensor& dx,
                    const Tensor& residual_grad) {
  if (kind_ == NormKind::kLayerNorm) {
    ops::layernorm_backward(dy, x, gain_, saved.mean, saved.rstd, dx, gain_grad_, bias_grad_, residual_grad);
  } else {
    ops::rmsnorm_backward(dy, x, gain_, saved.rstd, dx, gain_grad_, residual_grad);
  }
}

}  // namespace lattice
