// Norm: LayerNorm (GPT-2) or RMSNorm (Llama) over the hidden dimension, with the statistics its
// backward needs saved in a caller-provided NormSaved.
#pragma once

#include <string>

#include "kernels/device_context.h"
#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/parameter_store.h"

namespace lattice {

struct NormSaved {
  Tensor mean;  // [N] (LayerNorm only)
  Tensor rstd;  // [N]
  void allocate(const DeviceContext& ctx, int64_t rows);
};

class Norm {
 public:
  Norm() = default;
  Norm(ParameterStore& params, const std::string& prefix, NormKind kind, float eps);

  void forward(const Tensor& x, Tensor& y, NormSaved& saved) const;
  // dx overwritten (plus residual_grad when defined: the residual path's gradient, added in the same
  // pass on a GPU); gains/bias gradients accumulated.
  void backward(const Tensor& dy, const Tensor& x, const NormSaved& saved, Tensor& dx,
                const Tensor& residual_grad = Tensor());

 private:
  NormKind kind_ = NormKind::kLayerNorm;
  float eps_ = 1e-5f;
  Tensor gain_, gain_grad_;
  Tensor bias_, bias_grad_;
};

}  // namespace lattice
