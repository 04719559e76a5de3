// Parameter creation: init or HF import, whole model or one rank's share.
#include "trainer/model_builder.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "checkpoint/hf_interop.h"
#include "kernels/ops.h"
#include "model/model_parameters.h"
#include "trainer/param_box.h"

namespace lattice {

Device config_device(const Config& config) { return config.device == "cuda" ? Device::kCuda : Device::kCpu; }

std::unique_ptr<ParameterStore> build_parameters(const Config& config, const DeviceContext& ctx) {
  auto params = std::make_unique<ParameterStore>(model_parameter_specs(config.model), ctx);
  if (config.model.init_from.empty()) {
    params->initialize(config.training.seed);
  } else if (ctx.device() == Device::kCpu) {
    spdlog::info("loading weights from {}", config.model.init_from);
    import_hf(config.model, config.model.init_from, *params);
  } else {
    // The file's reader fills host tensors: load on the host (same specs, so the same flat
    // layout), then copy the flat buffer to the device in one transfer.
    const auto host = build_parameters(config, host_context());
    ops::copy(host->flat_values(), params->flat_values());
  }
  return params;
}

ModelLayout model_layout(const Config& config, const RankGrid& grid, const GridCoords& coords) {
  ModelLayout layout;
  layout.tp_rank = coords.tp;
  layout.tp_size = grid.tp_size();
  layout.sequence_parallel = config.parallel.sequence_parallel;
  layout.pp_rank = coords.pp;
  layout.pp_size = grid.pp_size();
  layout.virtual_stages = static_cast<int>(config.parallel.virtual_stages);
  layout.layers_per_stage = config.parallel.layers_per_stage;
  return layout;
}

std::vector<ParamSpec> rank_parameter_specs(const Config& config, const ModelLayout& layout) {
  std::vector<ParamSpec> specs = model_parameter_specs(config.model, layout);
  std::stable_partition(specs.begin(), specs.end(), [](const ParamSpec& s) {
    return s.replica && s.name == "embedding.word_embeddings.weight";
  });
  return specs;
}

std::unique_ptr<ParameterStore> build_parameters(const Config& config, const ModelLayout& layout,
                                                 const DeviceContext& ctx) {
  auto params = std::make_unique<ParameterStore>(rank_parameter_specs(config, layout), ctx,
                                                 precision_dtype(config.training.precision));
  if (config.model.init_from.empty()) {
    params->initialize(config.training.seed);
    return params;
  }
  // One parameter at a time, only this rank's: the host never holds the model (70B in fp32 is 282 GB,
  // on each of a node's ranks).
  spdlog::info("loading weights from {} (this rank's boxes, one parameter at a time)", config.model.init_from);
  std::vector<bool> filled(params->count(), false);
  read_hf(
      config.model, config.model.init_from, [&](const std::string& name) { return params->contains(name); },
      [&](const std::string& name, const Tensor& value) {
        const size_t i = params->index(name);
        copy_box_from_global(value, params->spec(i), params->fp32_value(i));
        filled[i] = true;
      });
  for (size_t i = 0; i < params->count(); ++i)
    LATTICE_CHECK(filled[i], "parameter '{}' is not in model.init_from's mapping", params->spec(i).name);
  params->commit_fp32_values();
  return params;
}

}  // namespace lattice
