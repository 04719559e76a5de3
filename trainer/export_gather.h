// Gathers the whole model onto world rank 0 from any TP × PP × DP layout, for the Hugging Face
// export: every rank of data-parallel rank 0 sends its parameter values; rank 0 copies each
// non-replica parameter's box into a one-process ParameterStore.
#pragma once

#include <memory>

#include "model/parameter_store.h"
#include "parallel/communicator.h"
#include "parallel/grid.h"
#include "trainer/config.h"

namespace lattice {

// A collective over `world` (every rank calls it). Returns the whole model on world rank 0 and
// nullptr elsewhere. `local` is this rank's store, built from rank_parameter_specs(config,
// model_layout(config, grid, grid.coords())): rank 0 derives every other rank's store layout the
// same way, so one message per rank suffices. `local_fp32` is this rank's fp32 parameter values in
// `local`'s flat layout (the optimizer's master weights: under bf16 they, not the bf16 compute copy,
// are the model). Checks that every element of every parameter arrived exactly once.
std::unique_ptr<ParameterStore> gather_full_model(const Config& config, const RankGrid& grid,
                                                  const ParameterStore& local, const Tensor& local_fp32,
                                                  Communicator& world);

}  // namespace lattice
