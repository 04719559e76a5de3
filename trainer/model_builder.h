// Creates the model's parameters as the config asks: seeded counter-based init, or the weights
// of a Hugging Face safetensors file (model.init_from).
#pragma once

#include <memory>

#include "trainer/config.h"
#include "model/parameter_store.h"

namespace lattice {

std::unique_ptr<ParameterStore> build_parameters(const Config& config);

}  // namespace lattice
