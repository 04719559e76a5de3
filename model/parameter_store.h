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
  // Parameters in fp32 (the training dtype is f32 today), on ctx's device; `ctx` must outlive this.
  ParameterStore(std::vector<ParamSpec> specs, const DeviceContext& ctx);

  // Counter-based init keyed by (seed, name, global element index).
  void initialize(uint64_t seed);
};

// Stable 64-bit hash of a parameter name (FNV-1a), the RNG stream of its init.
uint64_t name_stream(const std::string& name);

}  // namespace lattice
