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
void place_boxes(const std::vector<ParamSpec>& specs, const Tensor& flat, ParameterStore& full,
                 std::map<std::string, int64_t>& covered) {
  int64_t offset = 0;
  for (ParamSpec spec : specs) {
    spec.fill_defaults();
    const Tensor local = flat.slice_flat(offset, spec.shape);
    offset += shape_numel(spec.shape);
    if (spec.replica) continue;
    copy_box_to_global(local, spec, full.value(spec.name));
    covered[spec.name] += spec.box_numel();
  }
  LATTICE_CHECK(offset == flat.numel(), "export gather: specs cover {} elements, the rank sent {}", offset,
                flat.numel());
}

}  // namespace

std::unique_ptr<ParameterStore> gather_full_model(const Config& config, const RankGrid& grid,
                                                  const ParameterStore& local, Communicator& world) {
  LATTICE_CHECK(world.size() == grid.world_size() && world.rank() == grid.rank(),
                "export gather: world communicator (rank {} of {}) does not match the grid (rank {} of {})",
                world.rank(), world.size(), grid.rank(), grid.world_size());
  const bool root = grid.rank() == 0;
  if (!root) {
    if (grid.dp_rank() == 0) world.send(local.flat_values(), 0, kGatherTag);
    return nullptr;
  }
  auto full = std::make_unique<ParameterStore>(model_parameter_specs(config.model));
  std::map<std::string, int64_t> covered;
  place_boxes(local.specs(), local.flat_values(), *full, covered);
  for (int pp = 0; pp < grid.pp_size(); ++pp) {
    for (int tp = 0; tp < grid.tp_size(); ++tp) {
      const GridCoords c{tp, 0, pp};
      const int rank = grid.rank_of(c);
      if (rank == 0) continue;
      const std::vector<ParamSpec> specs = rank_parameter_specs(config, model_layout(config, grid, c));
      int64_t numel = 0;
      for (const ParamSpec& s : specs) numel += shape_numel(s.shape);
      Tensor flat = Tensor::empty({numel});
      world.recv(flat, rank, kGatherTag);
      place_boxes(specs, flat, *full, covered);
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
