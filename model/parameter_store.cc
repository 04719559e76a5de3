// ParameterStore: contiguous value/grad buffers and name lookup.
#include "model/parameter_store.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/fnv1a.h"
#include "kernels/ops.h"

namespace lattice {

uint64_t name_stream(const std::string& name) { return fnv1a_64(name); }

void ParamSpec::fill_defaults() {
  if (global_shape.empty()) global_shape = shape;
  if (offset.empty()) offset = Shape(global_shape.size(), 0);
  if (box.empty()) box = shape;
  LATTICE_CHECK(global_shape.size() == shape.size() && offset.size() == shape.size() && box.size() == shape.size(),
                "parameter '{}': local {}, global {}, offset {} and box {} differ in rank", name, shape_string(shape),
                shape_string(global_shape), shape_string(offset), shape_string(box));
  // An empty box (a tp rank whose vocabulary rows are all padding) may start past the end.
  const bool empty = shape_numel(box) == 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    LATTICE_CHECK(box[d] <= shape[d] && offset[d] >= 0 && (empty || offset[d] + box[d] <= global_shape[d]) &&
                      (d == 0 || box[d] == shape[d]),
                  "parameter '{}': box {} at {} does not fit local {} / global {}", name, shape_string(box),
                  shape_string(offset), shape_string(shape), shape_string(global_shape));
  }
}

ParameterStore::ParameterStore(std::vector<ParamSpec> specs, Device device) : specs_(std::move(specs)) {
  for (auto& s : specs_) s.fill_defaults();
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
      case InitKind::kNormal: {
        // Keyed by the global element index, so every layout holds the same weights; padding
        // rows past the box stay zero.
        ops::fill(values_[i], 0.0f);
        if (s.box_numel() == 0) break;
        Tensor box = values_[i].slice_flat(0, s.box);
        ops::fill_normal(box, s.global_shape, s.offset, seed, name_stream(s.name), s.init_std);
        break;
      }
    }
  }
}

void ParameterStore::zero_grads() { ops::fill(flat_grads_, 0.0f); }

}  // namespace lattice
