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

  // Initialization and loading write exact fp32 values, which become the optimizer's fp32 master
  // weights; the compute copy is rounded from them. For an f32 store these are the values
  // themselves; otherwise a separate fp32 flat buffer, kept until release_fp32_values().
  Tensor& fp32_value(size_t i) { return fp32_views_[i]; }
  const Tensor& fp32_values() const { return fp32_flat_; }
  // After writing fp32_value(i): the compute copy takes their values (a cast to bf16; nothing for f32).
  void commit_fp32_values();
  // Frees the separate fp32 buffer once the optimizer has taken its master weights from it.
  void release_fp32_values();

  // Counter-based init keyed by (seed, name, global element index), then commit_fp32_values().
  void initialize(uint64_t seed);

 private:
  Tensor fp32_flat_;
  std::vector<Tensor> fp32_views_;
};

// Stable 64-bit hash of a parameter name (FNV-1a), the RNG stream of its init.
uint64_t name_stream(const std::string& name);

}  // namespace lattice
