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
  spdlog::info("loading weights from {} (the whole file, then this rank's boxes)", config.model.init_from);
  const auto full = build_parameters(config, host_context());  // the file's whole model, on the host, in fp32
  for (size_t i = 0; i < params->count(); ++i) {
    const ParamSpec& spec = params->spec(i);
    copy_box_from_global(full->value(spec.name), spec, params->fp32_value(i));
  }
  params->commit_fp32_values();
  return params;
}

}  // namespace lattice
