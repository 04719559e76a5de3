// ParameterStore: counter-based initialization over the flat buffers, in fp32.
#include "model/parameter_store.h"

#include "kernels/error.h"
#include "kernels/fnv1a.h"
#include "kernels/ops.h"

namespace lattice {

uint64_t name_stream(const std::string& name) { return fnv1a_64(name); }

ParameterStore::ParameterStore(std::vector<ParamSpec> specs, const DeviceContext& ctx, DType param_dtype)
    : ParamGradBuffer(std::move(specs), param_dtype, ctx) {}

void ParameterStore::initial_value(size_t i, uint64_t seed, Tensor& dst) const {
  const ParamSpec& s = spec(i);
  LATTICE_CHECK(dst.dtype() == DType::kF32 && dst.shape() == s.shape, "initial value of '{}' into {}, not f32{}",
                s.name, dst.describe(), shape_string(s.shape));
  switch (s.init) {
    case InitKind::kZeros: ops::fill(dst, 0.0f); break;
    case InitKind::kOnes: ops::fill(dst, 1.0f); break;
    case InitKind::kNormal: {
      // Keyed by the global element index, so every layout holds the same weights; padding rows
      // past the box stay zero.
      ops::fill(dst, 0.0f);
      if (s.box_numel() == 0) break;
      Tensor box = dst.slice_flat(0, s.box);
      ops::fill_normal(box, s.global_shape, s.offset, seed, name_stream(s.name), s.init_std);
      break;
    }
  }
}

void ParameterStore::initialize(uint64_t seed) {
  LATTICE_CHECK(param_dtype() == DType::kF32,
                "ParameterStore::initialize: {} parameters take their fp32 init through trainer/model_builder.h's "
                "initial_values",
                dtype_name(param_dtype()));
  for (size_t i = 0; i < count(); ++i) initial_value(i, seed, value(i));
}

}  // namespace lattice
