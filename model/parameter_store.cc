// ParameterStore: contiguous value/grad buffers and name lookup.
#include "model/parameter_store.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

uint64_t name_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

ParameterStore::ParameterStore(std::vector<ParamSpec> specs, Device device) : specs_(std::move(specs)) {
  int64_t total = 0;
  for (const auto& s : specs_) total += shape_numel(s.shape);
  flat_values_ = Tensor::zeros({total}, DType::kF32, device);
  flat_grads_ = Tensor::zeros({total}, DType::kF32, device);
  int64_t offset = 0;
  for (const auto& s : specs_) {
    values_.push_back(flat_values_.slice_flat(offset, s.shape));
    grads_.push_back(flat_grads_.slice_flat(offset, s.shape));
    offset += shape_numel(s.shape);
  }
}

bool ParameterStore::contains(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return true;
  return false;
}

size_t ParameterStore::index(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return i;
  throw Error(fmt::format("no parameter named '{}'", name));
}

void ParameterStore::initialize(uint64_t seed) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const ParamSpec& s = specs_[i];
    switch (s.init) {
      case InitKind::kZeros: ops::fill(values_[i], 0.0f); break;
      case InitKind::kOnes: ops::fill(values_[i], 1.0f); break;
      case InitKind::kNormal:
        ops::fill_normal(values_[i], s.shape, Shape(s.shape.size(), 0), seed, name_stream(s.name), s.init_std);
        break;
    }
  }
}

void ParameterStore::zero_grads() { ops::fill(flat_grads_, 0.0f); }

}  // namespace lattice
