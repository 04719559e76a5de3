// Linear: y = x W^T + b on [N, in] -> [N, out], with W stored [out, in] (the layout that becomes
// column- or row-parallel by splitting dim 0 or dim 1). Bias optional.
//   kColumn: this rank holds out/tp output features (rows of W, bias part). Locally a plain
//     Linear; the input's region op (copy-to-region or SP gather) is the caller's, because one
//     gathered input feeds several column-parallel layers (q, k, v; gate, up).
//   kRow: this rank holds in/tp input features (columns of W), the bias whole. Forward reduces
//     the partial products over tp — all-reduce, or under SP a reduce-scatter of the token rows —
//     and then adds the bias once.
#pragma once

#include <span>
#include <string>

#include "kernels/tensor.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

enum class LinearKind { kPlain, kColumn, kRow };

class Linear {
 public:
  Linear() = default;
  // Binds to `prefix.weight` and, when present in the store, `prefix.bias`.
  Linear(ParameterStore& params, const std::string& prefix, LinearKind kind = LinearKind::kPlain,
         TensorParallel tp = {});

  // kRow under SP: x [N, in/tp] -> y [N/tp, out], `workspace` [N, out] receives the partial sums.
  // Otherwise y [N, out] and workspace is unused.
  void forward(const Tensor& x, Tensor& y, const Tensor& workspace = {}) const;
  // y = forward(x) + residual (residual shaped as y, not overlapping it): a block's output projection
  // joining the residual stream. Plain and column kinds as one ops::matmul_residual (one GEMM where the
  // device fuses it); a row-parallel layer adds the residual after its reduction and bias.
  void forward_residual(const Tensor& x, Tensor& y, const Tensor& residual, const Tensor& workspace = {}) const;
  // A GELU MLP's up projection, for the plain and column kinds: pre [N, out] = the forward's y,
  // out = gelu(pre), through ops::matmul_bias_gelu (one GEMM where training.gelu_fusion fuses it).
  void forward_gelu(const Tensor& x, Tensor& pre, Tensor& out) const;
  // dx overwritten (or accumulated when accumulate_dx), dW/db accumulated. dx may be undefined
  // when the input's gradient is not needed. kRow under SP: dy is [N/tp, out] and is all-gathered
  // into `workspace` [N, out] first. gelu_pre defined: x is gelu(gelu_pre), and dx (overwritten) is
  // the gradient of gelu_pre instead, through ops::matmul_gelu_backward.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool accumulate_dx = false,
                const Tensor& workspace = {}, const Tensor& gelu_pre = {});
  // The two halves of backward for the plain and column kinds, so that a caller can start
  // reducing dx over tp and compute the weight gradients while it travels.
  void backward_input(const Tensor& dy, Tensor& dx, bool accumulate_dx = false) const;
  void backward_weights(const Tensor& x, const Tensor& dy);

  // Layers of the plain or column kind that read one input (q, k, v; gate, up), all with a bias or
  // all without: their forwards, and their weight gradients, each as one ops::matmul_group (one
  // batched GEMM where the device has one and the weights, biases and outputs each lie at one
  // stride, as the flat parameter buffers and model/activations.cc lay them out). The results are
  // those of forward and backward_weights for each layer.
  static void forward_group(std::span<const Linear* const> layers, const Tensor& x, std::span<Tensor> ys);
  static void backward_weights_group(std::span<Linear* const> layers, const Tensor& x, std::span<const Tensor> dys);

  int64_t out_features() const { return weight_.dim(0); }
  int64_t in_features() const { return weight_.dim(1); }

 private:
  // dW += dy^T x, and the bias's gradient with it (ops::linear_weight_grad).
  void accumulate_weight_grads(const Tensor& x, const Tensor& dy);
  bool scatters_tokens() const { return kind_ == LinearKind::kRow && tp_.sequence_parallel; }
  // This rank's product is a partial sum that tp reduces (or reduce-scatters) before the bias is added.
  bool reduces_output() const { return scatters_tokens() || (kind_ == LinearKind::kRow && tp_.size() > 1); }

  LinearKind kind_ = LinearKind::kPlain;
  TensorParallel tp_;
  Tensor weight_, weight_grad_;
  Tensor bias_, bias_grad_;
};

}  // namespace lattice
