// `lattice plan`: ranks the layouts of a config's model on N GPUs (layout_plan.h) and prints them as
// a table whose lines end in a ready mpirun command, or as JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/config.h"
#include "trainer/gpu_spec.h"
#include "trainer/layout_plan.h"

namespace lattice {

struct PlanCommandOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string gpu = "h100";
  PlanOptions plan;
  bool json = false;
};

// One object per layout: tensor, pipeline, data, virtual_stages, schedule, micro_batch_size,
// micro_batches, global_batch_size, sequence_parallel, distributed_optimizer, recompute,
// memory_bytes, fits, step_s (and its parts), tokens_per_s, mfu, bubble, set (the --set arguments
// that train it from the config file: `user_overrides`, the plan's own --set, less those the layout
// replaces, then every layout key).
nlohmann::json plan_json(const PlanResult& result, const std::vector<std::string>& user_overrides = {});
// The ranked table with a header naming the GPU, the calibration and how long planning took.
std::string format_plan(const PlanResult& result, const Config& config, const GpuSpec& gpu,
                        const PlanCommandOptions& options, double seconds);

// Loads the config, plans, prints to stdout; returns the exit code.
int run_plan_command(const PlanCommandOptions& options);

}  // namespace lattice
