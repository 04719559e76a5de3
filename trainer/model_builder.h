// Creates the model's parameters as the config asks: seeded counter-based init, or the weights
// of a Hugging Face safetensors file (model.init_from) — for the whole model or one rank's share.
#pragma once

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

// This rank's parameters: seeded init keyed by global element index (the same weights as one
// process), or with model.init_from the full HF file loaded on this rank and each parameter's box
// copied out of it (every rank reads the whole file once at start; its memory is freed after).
std::unique_ptr<ParameterStore> build_parameters(const Config& config, const ModelLayout& layout,
                                                 const DeviceContext& ctx);

}  // namespace lattice
