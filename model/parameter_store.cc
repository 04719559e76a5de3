// ParameterStore: counter-based initialization over the flat buffers, in fp32.
#include "model/parameter_store.h"

#include "kernels/error.h"
#include "kernels/fnv1a.h"
#include "kernels/ops.h"

namespace lattice {

uint64_t name_stream(const std::string& name) { return fnv1a_64(name); }

ParameterStore::ParameterStore(std::vector<ParamSpec> specs, const DeviceContext& ctx, DType param_dtype)
    : ParamGradBuffer(std::move(specs), param_dtype, ctx) {
  if (param_dtype == DType::kF32) {
    fp32_flat_ = flat_values();
    for (size_t i = 0; i < count(); ++i) fp32_views_.push_back(value(i));
    return;
  }
  fp32_flat_ = ctx.zeros({numel()}, DType::kF32);
  for (size_t i = 0; i < count(); ++i) fp32_views_.push_back(fp32_flat_.slice_flat(offset(i), spec(i).shape));
}

void ParameterStore::commit_fp32_values() {
  LATTICE_CHECK(fp32_flat_.defined(), "ParameterStore: the fp32 values were already released");
  if (param_dtype() != DType::kF32) ops::cast(fp32_flat_, flat_values());
}

void ParameterStore::release_fp32_values() {
  if (param_dtype() == DType::kF32) return;  // they are the values
  fp32_flat_ = Tensor();
  fp32_views_.clear();
}

void ParameterStore::initialize(uint64_t seed) {
  for (size_t i = 0; i < count(); ++i) {
    const ParamSpec& s = spec(i);
    Tensor& v = fp32_value(i);
    switch (s.init) {
      case InitKind::kZeros: ops::fill(v, 0.0f); break;
      case InitKind::kOnes: ops::fill(v, 1.0f); break;
      case InitKind::kNormal: {
        // Keyed by the global element index, so every layout holds the same weights; padding
        // rows past the box stay zero.
        ops::fill(v, 0.0f);
        if (s.box_numel() == 0) break;
        Tensor box = v.slice_flat(0, s.box);
        ops::fill_normal(box, s.global_shape, s.offset, seed, name_stream(s.name), s.init_std);
        break;
      }
    }
  }
  commit_fp32_values();
}

}  // namespace lattice
