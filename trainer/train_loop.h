// The training loop on any TP × PP × DP layout (one process is the layout 1 × 1 × 1): builds this
// rank's share of the model, runs every step's micro-batches through the pipeline executor on the
// configured schedule, synchronises gradients (tp, embedding group, dp) while backward runs, clips by
// the global norm, steps AdamW on the LR schedule, evaluates, logs and writes metrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_profile.h"
#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/grid.h"
#include "trainer/config.h"
#include "trainer/step_batches.h"  // MicroBatchSource

namespace lattice {

struct TrainOptions {
  std::string export_dir;  // when set, the trained model is written there in Hugging Face format
  DType export_dtype = DType::kF32;  // of the exported weights: the fp32 master weights, or rounded to bf16
  // A parallel job: this rank's place in the grid, its groups and the world group, which must
  // outlive train(). All nullptr = one process (train() then uses one-process groups). World rank 0
  // writes the metrics file and the export; every rank writes its trace.
  const RankGrid* grid = nullptr;
  ProcessGroups* groups = nullptr;
  Communicator* world = nullptr;
  // Time every op of the steps after the first on this rank's device (kernels/op_profile.h):
  // TrainResult::op_profile.
  bool profile_ops = false;
};

struct TrainResult {
  double first_loss = 0;
  double final_loss = 0;
  double last_val_loss = -1;  // -1 when no evaluation ran
  // Throughput over the steps after the first (which pays for warm-up; a run of one step times it):
  // their tokens (and model FLOPs) over their summed step time. 0 when no step was timed.
  double tokens_per_s = 0;
  double gflops = 0;
  // The step, and the optimizer step (AdamW over this rank's parameters, with the distributed
  // optimizer's parameter gathers it launches), seconds: medians over the same steps, so that one
  // step the machine stalled (a shared VM can slow one many times over) does not skew them.
  double median_step_s = 0;
  double median_optimizer_s = 0;
  // Data parallelism: gradient communication outstanding and blocked on, summed over the steps
  // (GradBuckets::last_stats()); hidden share = 1 - wait / comm.
  double dp_comm_s = 0;
  double dp_wait_s = 0;
  // Pipeline parallelism: the measured bubble (measured_bubble) averaged over the steps after the
  // first, and the schedule's theoretical one. -1 / 0 without pipeline parallelism.
  double bubble_measured = -1;
  double bubble_theory = 0;
  // Peak memory of this process by the end of the run: resident host memory, and device memory on a GPU (-1 on the CPU).
  double peak_host_bytes = 0;
  double peak_device_bytes = -1;
  double device_outside_pool_bytes = -1;  // GPU: beyond the pool at the end (the context, libraries, NCCL)
  // TrainOptions::profile_ops: device time by op and operand shapes over `profiled_steps` steps.
  std::vector<OpTime> op_profile;
  int64_t profiled_steps = 0;
};

// Trains on the dataset the config names (validation on its valid split).
TrainResult train(const Config& config, const TrainOptions& options);
// Trains on any micro-batch source (benchmarks use synthetic tokens); no validation when
// `valid` is empty.
TrainResult train_on(const Config& config, const TrainOptions& options, const MicroBatchSource& train_data,
                     const MicroBatchSource& valid_data);

}  // namespace lattice
