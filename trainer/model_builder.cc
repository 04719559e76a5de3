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

std::unique_ptr<ParameterStore> rank_parameters(const Config& config, const ModelLayout& layout,
                                                const DeviceContext& ctx) {
  return std::make_unique<ParameterStore>(rank_parameter_specs(config, layout), ctx,
                                          precision_dtype(config.training.precision));
}

void initial_values(const Config& config, ParameterStore& params, const InitialValueSink& take) {
  const bool in_place = params.param_dtype() == DType::kF32;
  Tensor scratch;  // bf16: one parameter's fp32 values at a time
  if (!in_place) scratch = params.context().zeros({params.largest_param_numel()}, DType::kF32);
  auto fp32_of = [&](size_t i) { return in_place ? params.value(i) : scratch.slice_flat(0, params.spec(i).shape); };
  if (config.model.init_from.empty()) {
    for (size_t i = 0; i < params.count(); ++i) {
      Tensor fp32 = fp32_of(i);
      params.initial_value(i, config.training.seed, fp32);
      take(i, fp32);
    }
    return;
  }
  // The HF tensors behind this rank's parameters, one at a time: the host never holds the model
  // (70B in fp32 is 282 GB, on each of a node's ranks).
  spdlog::info("loading weights from {} (this rank's boxes, one parameter at a time)", config.model.init_from);
  std::vector<bool> filled(params.count(), false);
  read_hf(
      config.model, config.model.init_from, [&](const std::string& name) { return params.contains(name); },
      [&](const std::string& name, const Tensor& value) {
        const size_t i = params.index(name);
        Tensor fp32 = fp32_of(i);
        copy_box_from_global(value, params.spec(i), fp32);
        take(i, fp32);
        filled[i] = true;
      });
  for (size_t i = 0; i < params.count(); ++i)
    LATTICE_CHECK(filled[i], "parameter '{}' is not in model.init_from's mapping", params.spec(i).name);
}

}  // namespace lattice
