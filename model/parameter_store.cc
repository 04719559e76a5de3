// ParameterStore: counter-based initialization over the flat buffers.
#include "model/parameter_store.h"

#include "kernels/fnv1a.h"
#include "kernels/ops.h"

namespace lattice {

uint64_t name_stream(const std::string& name) { return fnv1a_64(name); }

ParameterStore::ParameterStore(std::vector<ParamSpec> specs, const DeviceContext& ctx)
    : ParamGradBuffer(std::move(specs), DType::kF32, ctx) {}

void ParameterStore::initialize(uint64_t seed) {
  for (size_t i = 0; i < count(); ++i) {
    const ParamSpec& s = spec(i);
    switch (s.init) {
      case InitKind::kZeros: ops::fill(value(i), 0.0f); break;
      case InitKind::kOnes: ops::fill(value(i), 1.0f); break;
      case InitKind::kNormal: {
        // Keyed by the global element index, so every layout holds the same weights; padding
        // rows past the box stay zero.
        ops::fill(value(i), 0.0f);
        if (s.box_numel() == 0) break;
        Tensor box = value(i).slice_flat(0, s.box);
        ops::fill_normal(box, s.global_shape, s.offset, seed, name_stream(s.name), s.init_std);
        break;
      }
    }
  }
}

}  // namespace lattice
