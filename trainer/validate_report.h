// `lattice validate --json`: everything validate checks and prints, as one JSON document (the
// resolved config, parameter counts, FLOPs per token, memory of one process, the resolved layout
// and its simulated schedule).
#pragma once

#include <nlohmann/json.hpp>

#include "trainer/config.h"
#include "trainer/model_stats.h"

namespace lattice {

// {"config": {...}, "parameters": {...}, "compute": {...}, "memory_bytes": {...}, "layout": {...}}
nlohmann::json validate_report_json(const Config& config, const ModelStats& stats, const ParallelLayout& layout);

}  // namespace lattice
