// ParameterStore: every parameter of the model by global name, with its global shape, its init
// rule and whether weight decay applies. Values and gradients each live in one contiguous fp32
// buffer (gradient buckets and the fused optimizer work on the flat buffers); each parameter's
// value/grad is a view into them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace lattice {

enum class InitKind { kNormal, kZeros, kOnes };

// One parameter as this rank holds it. Under tensor parallelism a rank holds a box (offset +
// extent) of the global tensor; the local tensor may have padding rows past the box (the
// vocabulary padded to a multiple of 128 x TP): padding is zero, gets zero gradient and is not
// part of the global tensor. Without sharding, global_shape = shape, offset = 0, box = shape.
struct ParamSpec {
  std::string name;    // global name, e.g. "layers.3.attention.q_proj.weight"
  Shape shape;         // shape of this rank's local tensor (padding included)
  InitKind init = InitKind::kNormal;
  float init_std = 0.02f;
  bool weight_decay = false;  // matrices (embeddings, linear weights) only
  Shape global_shape;  // the whole tensor; empty = shape
  Shape offset;        // where the local tensor starts in the global tensor; empty = zeros
  // Extent of the global tensor held here (leading part of the local tensor); empty = shape. It
  // may be empty (0 rows): a tp rank whose vocabulary rows are all padding (tiny vocabularies);
  // its offset may then lie past the end of the global tensor.
  Shape box;
  // Another rank of this rank's tp group or pipeline holds the same values (TP-duplicated norm
  // gains and row-parallel biases on tp rank > 0; the tied LM head on the last pipeline stage):
  // such a copy is not counted in the gradient norm and not written to checkpoints.
  bool replica = false;
  // Same value on every tp rank, with a gradient computed from this rank's share of the tokens
  // under sequence parallelism: its gradient must be summed over the tp group.
  bool tp_duplicated = false;

  // The fields above with their defaults filled in (done by ParameterStore).
  void fill_defaults();
  // Elements of the box.
  int64_t box_numel() const { return shape_numel(box); }
};

class ParameterStore {
 public:
  explicit ParameterStore(std::vector<ParamSpec> specs, Device device = Device::kCpu);

  size_t count() const { return specs_.size(); }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  Tensor& value(size_t i) { return values_[i]; }
  const Tensor& value(size_t i) const { return values_[i]; }
  Tensor& grad(size_t i) { return grads_[i]; }
  const Tensor& grad(size_t i) const { return grads_[i]; }

  // Index of a parameter by name; throws lattice::Error listing close names when absent.
  size_t index(const std::string& name) const;
  bool contains(const std::string& name) const;
  Tensor& value(const std::string& name) { return values_[index(name)]; }
  Tensor& grad(const std::string& name) { return grads_[index(name)]; }

  Tensor& flat_values() { return flat_values_; }
  Tensor& flat_grads() { return flat_grads_; }
  const Tensor& flat_values() const { return flat_values_; }
  const Tensor& flat_grads() const { return flat_grads_; }
  int64_t numel() const { return flat_values_.numel(); }

  // Counter-based init keyed by (seed, name, global element index).
  void initialize(uint64_t seed);
  void zero_grads();

 private:
  std::vector<ParamSpec> specs_;
  Tensor flat_values_;
  Tensor flat_grads_;
  std::vector<Tensor> values_;
  std::vector<Tensor> grads_;
};

// Stable 64-bit hash of a parameter name (FNV-1a), the RNG stream of its init.
uint64_t name_stream(const std::string& name);

}  // namespace lattice
