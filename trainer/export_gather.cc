// The export gather: one point-to-point message per (tp, pp) rank of dp rank 0 to world rank 0.
#include "trainer/export_gather.h"

#include <map>

#include <fmt/format.h>

#include "kernels/error.h"
#include "model/model_parameters.h"
#include "trainer/model_builder.h"
#include "trainer/param_box.h"

namespace lattice {
namespace {

constexpr int kGatherTag = 7001;

// Copies the non-replica boxes of a rank's flat values into the whole model; counts the elements.
void place_boxes(const ParamLayout& layout, const Tensor& flat, ParameterStore& full,
                 std::map<std::string, int64_t>& covered) {
  LATTICE_CHECK(layout.numel() == flat.numel(), "export gather: specs cover {} elements, the rank sent {}",
                layout.numel(), flat.numel());
  for (size_t i = 0; i < layout.count(); ++i) {
    const ParamSpec& spec = layout.spec(i);
    if (spec.replica) continue;
    copy_box_to_global(flat.slice_flat(layout.offset(i), spec.shape), spec, full.value(spec.name));
    covered[spec.name] += spec.box_numel();
  }
}

}  // namespace

std::unique_ptr<ParameterStore> gather_full_model(const Config& config, const RankGrid& grid,
                                                  const ParameterStore& local, const Tensor& local_fp32,
                                                  Communicator& world) {
  LATTICE_CHECK(world.size() == grid.world_size() && world.rank() == grid.rank(),
                "export gather: world communicator (rank {} of {}) does not match the grid (rank {} of {})",
                world.rank(), world.size(), grid.rank(), grid.world_size());
  LATTICE_CHECK(local_fp32.dtype() == DType::kF32 && local_fp32.numel() == local.numel(),
                "export gather: the values to send are {}, expected f32[{}]", local_fp32.describe(), local.numel());
  const bool root = grid.rank() == 0;
  if (!root) {
    if (grid.dp_rank() == 0) world.send(local_fp32, 0, kGatherTag);
    return nullptr;
  }
  auto full = std::make_unique<ParameterStore>(model_parameter_specs(config.model), host_context());
  std::map<std::string, int64_t> covered;
  place_boxes(local, local_fp32, *full, covered);
  for (int pp = 0; pp < grid.pp_size(); ++pp) {
    for (int tp = 0; tp < grid.tp_size(); ++tp) {
      const GridCoords c{tp, 0, pp};
      const int rank = grid.rank_of(c);
      if (rank == 0) continue;
      const ParamLayout layout(rank_parameter_specs(config, model_layout(config, grid, c)));
      Tensor flat = Tensor::empty({layout.numel()});  // host: the export is written from the host
      world.recv(flat, rank, kGatherTag);
      place_boxes(layout, flat, *full, covered);
    }
  }
  for (const ParamSpec& s : full->specs()) {
    const int64_t want = shape_numel(s.shape);
    LATTICE_CHECK(covered[s.name] == want, "export gather: parameter '{}' got {} of its {} elements from the ranks' "
                  "boxes (a layout bug: boxes must tile each parameter exactly once)", s.name, covered[s.name], want);
  }
  return full;
}

}  // namespace lattice
