// Parameter creation: init or HF import.
#include "trainer/model_builder.h"

#include <spdlog/spdlog.h>

#include "checkpoint/hf_interop.h"
#include "model/model_parameters.h"

namespace lattice {

std::unique_ptr<ParameterStore> build_parameters(const Config& config) {
  auto params = std::make_unique<ParameterStore>(model_parameter_specs(config.model));
  if (config.model.init_from.empty()) {
    params->initialize(config.training.seed);
  } else {
    spdlog::info("loading weights from {}", config.model.init_from);
    import_hf(config.model, config.model.init_from, *params);
  }
  return params;
}

}  // namespace lattice
