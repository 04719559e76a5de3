// Creates the model's parameters as the config asks: seeded counter-based init, or the weights
// of a Hugging Face safetensors file (model.init_from) — for the whole model or one rank's share.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/model_layout.h"
#include "model/parameter_store.h"
#include "parallel/grid.h"
#include "trainer/config.h"

namespace lattice {

// The device the config trains on (its top-level "device": cpu or cuda).
Device config_device(const Config& config);

// The whole model (one process), on ctx's device.
std::unique_ptr<ParameterStore> build_parameters(const Config& config, const DeviceContext& ctx);

// The piece of the model the rank at `coords` holds under the config's parallel layout.
ModelLayout model_layout(const Config& config, const RankGrid& grid, const GridCoords& coords);

// The specs of that rank's ParameterStore, in store order: model_parameter_specs(config, layout),
// except that a `replica` copy of the tied word embeddings (the last stage's head) comes first.
// Why: gradient buckets launch in reverse store order, as backward produces gradients; that copy's
// gradient is final only after the embedding-group sum, which completes when the first stage's
// backward ends — first in the store, it sits in the last bucket and holds no other bucket back.
std::vector<ParamSpec> rank_parameter_specs(const Config& config, const ModelLayout& layout);

// This rank's parameters, in training.precision, not yet initialized (zero): initial_values sets them.
std::unique_ptr<ParameterStore> rank_parameters(const Config& config, const ModelLayout& layout,
                                                const DeviceContext& ctx);

// The exact fp32 initial values of `params`' parameters — seeded init keyed by global element index
// (the same weights as one process), or with model.init_from each parameter's box of the HF file's
// tensor, read one at a time — handed to take(i, fp32) one parameter at a time: f32 of parameter
// i's local shape on the store's device, valid during the call. f32 parameters are written in
// place (fp32 is the parameter itself); bf16 ones go through one scratch tensor the size of the
// largest parameter, so the rank's parameters never exist in fp32 beside the optimizer's state.
using InitialValueSink = std::function<void(size_t param, const Tensor& fp32)>;
void initial_values(const Config& config, ParameterStore& params, const InitialValueSink& take);

}  // namespace lattice
