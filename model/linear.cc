// Linear layer forward/backward through ops::matmul.
#include "model/linear.h"

#include "kernels/ops.h"

namespace lattice {

Linear::Linear(ParameterStore& params, const std::string& prefix)
    : weight_(params.value(prefix + ".weight")), weight_grad_(params.grad(prefix + ".weight")) {
  if (params.contains(prefix + ".bias")) {
    bias_ = params.value(prefix + ".bias");
    bias_grad_ = params.grad(prefix + ".bias");
  }
}

void Linear::forward(const Tensor& x, Tensor& y) const {
  ops::matmul(x, false, weight_, true, y);
  if (bias_.defined()) ops::add_bias(y, bias_);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool accumulate_dx) {
  // dW[out, in] += dy^T x
  ops::matmul(dy, true, x, false, weight_grad_, 1.0f, 1.0f);
  if (bias_.defined()) ops::bias_backward(dy, bias_grad_);
  if (dx.defined()) ops::matmul(dy, false, weight_, false, dx, 1.0f, accumulate_dx ? 1.0f : 0.0f);
}

}  // namespace lattice
