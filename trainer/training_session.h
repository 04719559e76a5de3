// TrainingSession: one rank's training run. The constructor builds everything the run needs (the
// model chunks, the optimizer, gradient sync, the pipeline executor, checkpoints, metrics); run()
// steps it, evaluates, saves and stops on the step boundaries, and summarizes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/device_context.h"
#include "model/model_chunk.h"
#include "model/parameter_store.h"
#include "parallel/activation_slots.h"
#include "parallel/grad_buckets.h"
#include "parallel/grad_sync.h"
#include "parallel/optimizer.h"
#include "parallel/pipeline_executor.h"
#include "parallel/trace.h"
#include "trainer/chunk_stage.h"
#include "trainer/config.h"
#include "trainer/memory_plan.h"
#include "trainer/metrics.h"
#include "trainer/model_stats.h"
#include "trainer/optimizer.h"
#include "trainer/rank_context.h"
#include "trainer/step_readback.h"
#include "trainer/stop_request.h"
#include "trainer/tensorboard_writer.h"
#include "trainer/train_loop.h"
#include "trainer/training_checkpoint.h"
#include "trainer/training_sampler.h"
#include "trainer/whole_model_math.h"

namespace lattice {

class CheckpointLock;

class TrainingSession {
 public:
  TrainingSession(const Config& config, const TrainOptions& options, MicroBatchSource train_data,
                  MicroBatchSource valid_data);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Trains from the checkpoint's step (or step 1) to training.train_iters or a stop request.
  TrainResult run();

 private:
  // What one training step produced (host values, read back once per step).
  struct StepOutcome {
    double loss = 0;
    double grad_norm = 0;
    double lr = 0;
    double bubble = -1;  // measured pipeline bubble (pipeline > 1)
    double hidden = -1;  // hidden share of the dp gradient communication (data > 1)
  };
  // Running totals over the steps after the first (which pays for warm-up).
  struct Throughput {
    int64_t steps = 0, bubble_steps = 0;
    double seconds = 0, bubble = 0;
    std::vector<double> step_s, optimizer_s;  // per timed step
  };

  void check_output_paths_on_every_rank(const Config& c, const std::string& export_dir);
  void write_stop_report() const;
  void build_model();
  void build_optimizer();
  void build_chunks();
  void build_pipeline();
  void log_precision() const;
  void log_layout() const;
  void log_memory_plan() const;
  StepOutcome train_step(int64_t step);
  // Opens (before `step`) or closes (after it) logging.profile_step_start..end's capture range.
  void profiler_capture(bool on, int64_t step);
  double evaluate(int64_t step);
  void read_back();
  void record(int64_t step, const StepOutcome& outcome, double seconds);
  // Whether a step counts in the throughput means (not the first, which pays for warm-up).
  bool timed_step(int64_t step) const;
  // Adds the optimizer time of the step optimizer_events_ hold (see the .cc).
  void account_optimizer_time();
  // The step boundary: commits a finished background save, votes on stopping, saves when due.
  // True when the run stops after this step.
  bool end_step(int64_t step);
  void report_memory(RunSummary& summary);
  void summarize();
  void export_model();

  const Config& c_;
  const TrainOptions& options_;
  const MicroBatchSource train_data_, valid_data_;
  const std::chrono::steady_clock::time_point run_begin_;  // the summary's wall time
  const int64_t start_resident_bytes_;                      // RSS before anything is built (memory report)
  RankContext rc_;
  std::unique_ptr<StopRequest> stop_request_;  // training.exit_duration_mins counts from its start
  ParallelLayout pl_;
  MemoryPlan memory_plan_;  // plan_memory(c_, pl_): logged at the start, set against the measured peak at the end
  int p_ = 1, v_ = 1, D_ = 1, m_ = 1;
  int64_t tokens_per_step_ = 0;
  bool capturing_ = false;  // between profiler_capture(true) and profiler_capture(false)
  bool profiling_ = false;  // TrainOptions::profile_ops: an OpProfile runs (from the first timed step)
  std::unique_ptr<CheckpointLock> checkpoint_lock_;
  ModelStats stats_;
  std::unique_ptr<DeviceContext> device_;  // what this rank computes on: every device tensor comes from it
  std::unique_ptr<ParameterStore> params_;
  // This rank's action lists (training and forward-only evaluation) and the activation slots each
  // chunk needs for them.
  std::vector<Action> actions_, eval_actions_;
  ActivationSlots slots_, eval_slots_;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;
  std::unique_ptr<GradBuckets> buckets_;
  bool sharded_ = false;  // the distributed optimizer (ZeRO-1): this rank steps its shard
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<TrainingCheckpoint> checkpoint_;
  int64_t first_step_ = 1;
  std::unique_ptr<MetricsWriter> metrics_;
  ProgressLine progress_;  // the log line's means since the previous line
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<TrainingSampler> sampler_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<StepBatches> batches_;
  std::vector<std::unique_ptr<ChunkStage>> stages_;
  std::vector<PipelineStage*> stage_ptrs_;
  std::unique_ptr<PipelineExecutor> executor_;
  StepGroups groups_{};
  std::unique_ptr<GradNorm> grad_norm_;
  Tensor step_losses_;  // this rank's token losses of the step (last pipeline stage only)
  // The step's (or evaluation pass's) one copy back to the host: the loss sums and the gradient
  // sums of squares.
  std::unique_ptr<StepReadback> readback_;
  float grad_scale_ = 1;

  TrainResult result_;
  Throughput throughput_;
  // The last step's optimizer start and end, read once a later synchronization has passed them.
  struct {
    int64_t step = 0;
    Event start, end;
  } optimizer_events_;
  StopDecision stopped_;
  int64_t last_step_ = 0;   // the last step this run takes
  int64_t last_saved_ = 0;  // the step of this run's last checkpoint (0 = none)
  std::chrono::steady_clock::time_point loop_begin_;
};

}  // namespace lattice
