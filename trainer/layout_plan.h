// Layout planning for `lattice plan`: every valid TP × PP × DP layout of a model on N GPUs (with
// virtual stages, micro-batch size, sequence parallelism, distributed optimizer and recompute), and
// for each a predicted memory per GPU (plan_memory, the accounting `lattice validate` prints) and
// step time: compute at a calibrated fraction of peak, the pipeline bubble from the schedule
// simulator with per-chunk costs (the loss head on the last stage), and the exposed communication
// (α + bytes/β per collective: TP inside the node, DP and PP across nodes, less what the schedule
// hides where the GpuSpec's communication overlaps compute). Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config.h"
#include "trainer/gpu_spec.h"

namespace lattice {

// The one calibration number: the fraction of the dtype's peak FLOP/s that a layer's GEMMs and the
// memory-bound work around them reach together. Fitted once against the Megatron-LM paper's Table 1
// (A100, tests/plan/plan_published_test.cc) and used unchanged for every GPU. A CPU's own figure is
// what `lattice bench` prints (--gemm-efficiency; tests/plan/plan_measured_test.sh).
constexpr double kDefaultGemmEfficiency = 0.5;

struct PlanOptions {
  int gpus = 0;
  int gpus_per_node = 0;      // 0: the GpuSpec's
  int64_t global_batch = 0;   // 0: the config's training.global_batch_size
  double gemm_efficiency = kDefaultGemmEfficiency;
  // Layouts returned, best first, each with its schedule simulated (0: all of them, slower).
  int top = 10;
};

struct LayoutPrediction {
  // ---- the layout ----
  int tensor = 1, pipeline = 1, data = 1, virtual_stages = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t micro_batch_size = 1, micro_batches = 1, global_batch_size = 1;
  bool sequence_parallel = false, distributed_optimizer = false;
  Recompute recompute = Recompute::kNone;
  // ---- memory ----
  int64_t memory_bytes = 0;  // plan_memory's peak_bytes: the largest rank
  bool fits = false;         // memory_bytes <= the GPU's memory × its usable fraction
  // ---- time of one step, seconds ----
  double step_s = 0;
  double compute_s = 0;         // the busiest rank's forward + backward (+ recompute) of all micro-batches
  double bubble_s = 0;          // pipeline makespan - compute_s (idle waiting, p2p included)
  double bubble = 0;            // the simulator's idle share: 1 - sum(busy) / (p · makespan)
  double dp_exposed_s = 0;      // data-parallel gradient reduction not hidden behind the schedule
  double optimizer_s = 0;       // the AdamW step (memory bound) + parameter all-gather not hidden
  double tp_comm_s = 0;         // tensor-parallel collectives inside compute_s (never overlapped)
  bool simulated = false;       // the bubble comes from the schedule simulator (else the closed form)
  // ---- throughput ----
  double tokens_per_s = 0;
  double mfu = 0;               // model FLOPs (compute_model_stats, no recompute) / (gpus · peak)
  double model_tflops_per_gpu = 0;
};

struct PlanResult {
  // Best first: the fitting ones by tokens/s, then the others by memory (the nearest to fitting first).
  std::vector<LayoutPrediction> layouts;
  int64_t candidates = 0;                 // valid layouts considered
  int64_t simulated = 0;
  double peak_flops = 0;                  // per GPU, for the training dtype
  int gpus_per_node = 8;
};

// Every valid layout of `config`'s model for options.gpus GPUs, predicted and ranked. Throws
// InputError (naming --gpus / --global-batch) when no layout of the model can use that many GPUs.
PlanResult plan_layouts(const Config& config, const GpuSpec& gpu, const PlanOptions& options);

// The prediction for the layout `config` itself describes (its parallel section, micro-batch size
// and recompute) on options.gpus GPUs, with the schedule simulated. Throws what validate_layout throws.
LayoutPrediction predict_layout(const Config& config, const GpuSpec& gpu, const PlanOptions& options);

// The config keys of a layout, as `--set` arguments ("parallel.tensor=8", ...): all of them, or with
// `base` only those whose value differs from base's.
std::vector<std::string> layout_overrides(const LayoutPrediction& layout, const Config* base = nullptr);
// `config` with a layout's keys applied (what --set layout_overrides(layout) gives).
Config apply_layout(const Config& config, const LayoutPrediction& layout);

}  // namespace lattice
