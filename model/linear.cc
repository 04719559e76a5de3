// Linear layer forward/backward through ops::matmul, with the row-parallel reduction.
#include "model/linear.h"

#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

Linear::Linear(ParameterStore& params, const std::string& prefix, LinearKind kind, TensorParallel tp)
    : kind_(kind), tp_(tp), weight_(params.value(prefix + ".weight")), weight_grad_(params.grad(prefix + ".weight")) {
  if (params.contains(prefix + ".bias")) {
    bias_ = params.value(prefix + ".bias");
    bias_grad_ = params.grad(prefix + ".bias");
  }
}

void Linear::forward(const Tensor& x, Tensor& y, const Tensor& workspace) const {
  if (scatters_tokens()) {
    LATTICE_CHECK(workspace.defined(), "row-parallel linear under sequence parallelism needs a workspace");
    Tensor partial = workspace;
    ops::matmul(x, false, weight_, true, partial);
    reduce_scatter_tokens_forward(tp_, partial, y);
  } else if (bias_.defined() && !reduces_output()) {
    ops::matmul_bias(x, false, weight_, true, bias_, y);  // nothing to reduce: the GEMM adds the bias
    return;
  } else {
    ops::matmul(x, false, weight_, true, y);
    if (kind_ == LinearKind::kRow) reduce_from_tp_region_forward(tp_, y);
  }
  // After the reduction: the bias is added once, not once per rank.
  if (bias_.defined()) ops::add_bias(y, bias_);
}

void Linear::forward_residual(const Tensor& x, Tensor& y, const Tensor& residual, const Tensor& workspace) const {
  if (reduces_output()) {
    forward(x, y, workspace);
    ops::add(y, residual, y);
    return;
  }
  ops::matmul_residual(x, false, weight_, true, bias_, residual, y);
}

void Linear::forward_gelu(const Tensor& x, Tensor& pre, Tensor& out) const {
  LATTICE_CHECK(kind_ != LinearKind::kRow, "forward_gelu is for plain and column-parallel layers");
  ops::matmul_bias_gelu(x, false, weight_, true, bias_, pre, out);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool accumulate_dx, const Tensor& workspace,
                      const Tensor& gelu_pre) {
  // The bias was added to the reduced output: its gradient comes from this rank's rows of dy
  // (under SP a partial sum over tokens, summed over tp by the trainer's GradSync).
  const Tensor* grad = &dy;
  if (scatters_tokens()) {
    LATTICE_CHECK(workspace.defined(), "row-parallel linear under sequence parallelism needs a workspace");
    if (bias_.defined()) ops::bias_backward(dy, bias_grad_);
    reduce_scatter_tokens_backward(tp_, dy, workspace);
    grad = &workspace;
    ops::matmul(*grad, true, x, false, weight_grad_, 1.0f, 1.0f);  // dW[out, in] += dy^T x
  } else {
    // Row-parallel without SP: the reduce-from-region backward is the identity.
    accumulate_weight_grads(x, dy);
  }
  if (gelu_pre.defined()) {
    LATTICE_CHECK(dx.defined() && !accumulate_dx, "a GELU input's gradient is overwritten, not accumulated");
    ops::matmul_gelu_backward(*grad, false, weight_, false, gelu_pre, dx);
  } else if (dx.defined()) {
    ops::matmul(*grad, false, weight_, false, dx, 1.0f, accumulate_dx ? 1.0f : 0.0f);
  }
}

void Linear::backward_input(const Tensor& dy, Tensor& dx, bool accumulate_dx) const {
  LATTICE_CHECK(kind_ != LinearKind::kRow, "backward_input is for plain and column-parallel layers");
  ops::matmul(dy, false, weight_, false, dx, 1.0f, accumulate_dx ? 1.0f : 0.0f);
}

void Linear::backward_weights(const Tensor& x, const Tensor& dy) {
  LATTICE_CHECK(kind_ != LinearKind::kRow, "backward_weights is for plain and column-parallel layers");
  accumulate_weight_grads(x, dy);
}

void Linear::accumulate_weight_grads(const Tensor& x, const Tensor& dy) {
  if (bias_.defined()) {
    ops::linear_weight_grad(dy, x, weight_grad_, bias_grad_);  // one GEMM where the device fuses the bias's
  } else {
    ops::matmul(dy, true, x, false, weight_grad_, 1.0f, 1.0f);  // dW[out, in] += dy^T x
  }
}

void Linear::forward_group(std::span<const Linear* const> layers, const Tensor& x, std::span<Tensor> ys) {
  std::vector<Tensor> weights, biases;
  for (const Linear* layer : layers) {
    LATTICE_CHECK(layer->kind_ != LinearKind::kRow, "forward_group is for plain and column-parallel layers");
    LATTICE_CHECK(layer->bias_.defined() == layers[0]->bias_.defined(), "forward_group: layers with and without a bias");
    weights.push_back(layer->weight_);
    if (layer->bias_.defined()) biases.push_back(layer->bias_);
  }
  ops::matmul_group({&x, 1}, false, weights, true, biases, ys);
}

void Linear::backward_weights_group(std::span<Linear* const> layers, const Tensor& x, std::span<const Tensor> dys) {
  std::vector<Tensor> weight_grads, bias_grads;
  for (const Linear* layer : layers) {
    LATTICE_CHECK(layer->kind_ != LinearKind::kRow, "backward_weights_group is for plain and column-parallel layers");
    LATTICE_CHECK(layer->bias_.defined() == layers[0]->bias_.defined(),
                  "backward_weights_group: layers with and without a bias");
    weight_grads.push_back(layer->weight_grad_);
    if (layer->bias_.defined()) bias_grads.push_back(layer->bias_grad_);
  }
  ops::matmul_group(dys, true, {&x, 1}, false, {}, weight_grads, 1.0f, 1.0f);
  if (!bias_grads.empty()) ops::bias_backward_group(dys, bias_grads);
}

}  // namespace lattice
