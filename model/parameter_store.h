// ParameterStore: the model-facing registry of every parameter by global name (global shape, init
// rule, decay flag) over the flat parameter/gradient buffers of parallel/param_grad_buffer.h, and
// the counter-based initialization keyed by (seed, name, global element index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "parallel/param_grad_buffer.h"

namespace lattice {

class ParameterStore : public ParamGradBuffer {
 public:
  // Parameters in `param_dtype` — the compute dtype: f32, or bf16 under mixed precision — on ctx's
  // device; gradients in fp32. `ctx` must outlive this.
  ParameterStore(std::vector<ParamSpec> specs, const DeviceContext& ctx, DType param_dtype = DType::kF32);

  // The exact fp32 initial values of parameter i into `dst` (f32, its local shape, on the store's
  // device): counter-based, keyed by (seed, name, global element index), so every layout holds the
  // weights one process would; padding rows past the box are zero. They are the optimizer's fp32
  // master weights; a bf16 compute copy is their rounding.
  void initial_value(size_t i, uint64_t seed, Tensor& dst) const;
  // Every parameter's initial_value, in place: f32 stores only (a bf16 store's parameters take
  // theirs one at a time through trainer/model_builder.h's initial_values and the optimizer).
  void initialize(uint64_t seed);
};

// Stable 64-bit hash of a parameter name (FNV-1a), the RNG stream of its init.
uint64_t name_stream(const std::string& name);

}  // namespace lattice
