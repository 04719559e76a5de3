// Linear: y = x W^T + b on [N, in] -> [N, out], with W stored [out, in] (the layout that becomes
// column- or row-parallel by splitting dim 0 or dim 1). Bias optional.
#pragma once

#include <string>

#include "kernels/tensor.h"
#include "model/parameter_store.h"

namespace lattice {

class Linear {
 public:
  Linear() = default;
  // Binds to `prefix.weight` and, when present in the store, `prefix.bias`.
  Linear(ParameterStore& params, const std::string& prefix);

  void forward(const Tensor& x, Tensor& y) const;
  // dx overwritten (or accumulated when accumulate_dx), dW/db accumulated. dx may be undefined
  // when the input's gradient is not needed.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, bool accumulate_dx = false);

  int64_t out_features() const { return weight_.dim(0); }
  int64_t in_features() const { return weight_.dim(1); }

 private:
  Tensor weight_, weight_grad_;
  Tensor bias_, bias_grad_;
};

}  // namespace lattice
