// ParamGradBuffer (Megatron-Core's ParamAndGradBuffer): the flat parameters in their compute dtype
// and the flat fp32 gradients of one ParamLayout; each parameter's value/grad is a view into them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/tensor.h"
#include "parallel/param_layout.h"

namespace lattice {

class ParamGradBuffer : public ParamLayout {
 public:
  // Zeros on ctx's device: parameters in `param_dtype`, gradients in fp32 (they accumulate over
  // micro-batches). `ctx` must outlive this; whatever computes on these parameters allocates from it.
  ParamGradBuffer(std::vector<ParamSpec> specs, DType param_dtype, const DeviceContext& ctx);

  DType param_dtype() const { return flat_values_.dtype(); }
  DType grad_dtype() const { return flat_grads_.dtype(); }
  Device device() const { return ctx_->device(); }
  const DeviceContext& context() const { return *ctx_; }

  Tensor& value(size_t i) { return values_[i]; }
  const Tensor& value(size_t i) const { return values_[i]; }
  Tensor& grad(size_t i) { return grads_[i]; }
  const Tensor& grad(size_t i) const { return grads_[i]; }
  Tensor& value(const std::string& name) { return values_[index(name)]; }
  Tensor& grad(const std::string& name) { return grads_[index(name)]; }

  Tensor& flat_values() { return flat_values_; }
  Tensor& flat_grads() { return flat_grads_; }
  const Tensor& flat_values() const { return flat_values_; }
  const Tensor& flat_grads() const { return flat_grads_; }

  void zero_grads();

 private:
  const DeviceContext* ctx_;
  Tensor flat_values_;
  Tensor flat_grads_;
  std::vector<Tensor> values_;
  std::vector<Tensor> grads_;
};

}  // namespace lattice
