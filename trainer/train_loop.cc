// The training loop: this rank's model chunks run each step's action list (the configured pipeline
// schedule; one process is p = v = 1) through the PipelineExecutor, then the whole-model math.
#include "trainer/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_lock.h"
#include "data/batch_loader.h"
#include "model/model_chunk.h"
#include "parallel/activation_slots.h"
#include "parallel/grad_buckets.h"
#include "parallel/grad_sync.h"
#include "parallel/local_communicator.h"
#include "parallel/optimizer.h"
#include "parallel/pipeline_executor.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"
#include "trainer/chunk_stage.h"
#include "trainer/export_gather.h"
#include "trainer/hf_export.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"
#include "trainer/optimizer.h"
#include "trainer/output_paths.h"
#include "trainer/stop_request.h"
#include "trainer/training_checkpoint.h"
#include "trainer/training_sampler.h"
#include "trainer/whole_model_math.h"

namespace lattice {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// This rank's grid position and groups: the job's, or one-process groups when there is no job.
struct RankContext {
  RankGrid grid{1, 0, 1, 1, 1};
  Communicator* world = nullptr;
  Communicator* tp = nullptr;
  Communicator* dp = nullptr;
  Communicator* pp = nullptr;
  Communicator* embedding = nullptr;  // nullptr on middle pipeline stages
  std::vector<std::unique_ptr<Communicator>> owned;
};

void init_rank_context(RankContext& r, const TrainOptions& o) {
  if (o.grid != nullptr) {
    LATTICE_CHECK(o.groups != nullptr && o.world != nullptr, "a parallel job needs its process groups and world");
    r.grid = *o.grid;
    r.world = o.world;
    r.tp = o.groups->tp.get();
    r.dp = o.groups->dp.get();
    r.pp = o.groups->pp.get();
    r.embedding = o.groups->embedding.get();
    return;
  }
  for (const char* name : {"world", "tp", "dp", "pp", "embedding"}) r.owned.push_back(std::make_unique<LocalCommunicator>(name));
  r.world = r.owned[0].get();
  r.tp = r.owned[1].get();
  r.dp = r.owned[2].get();
  r.pp = r.owned[3].get();
  r.embedding = r.owned[4].get();
}

// A loader read in order: the (g, m) the loop asks for is normally where the loader stands; any
// other position (validation restarting at batch 0) is a seek to its consumed-samples count.
MicroBatchSource dataset_source(std::shared_ptr<BatchLoader> loader) {
  return [loader](int64_t g, int64_t m, Tensor& ids, Tensor& targets) {
    const LoaderOptions& o = loader->options();
    const int64_t consumed = g * o.global_batch_size + m * o.micro_batch_size * o.dp_size;
    if (consumed != loader->consumed_samples()) loader->seek(consumed);
    loader->next(ids, targets);
  };
}

bool reads_data(const ModelLayout& layout) {
  for (int c = 0; c < layout.num_chunks(); ++c)
    if (layout.has_embedding(c) || layout.has_head(c)) return true;
  return false;
}

}  // namespace

TrainResult train(const Config& c, const TrainOptions& options) {
  const RankGrid grid = options.grid != nullptr ? *options.grid : RankGrid(1, 0, 1, 1, 1);
  validate_for_training(c, grid.world_size());
  const int64_t T = c.model.seq_length;
  LoaderOptions lo;
  lo.micro_batch_size = c.training.micro_batch_size;
  lo.global_batch_size = c.training.global_batch_size;
  lo.dp_rank = grid.dp_rank();
  lo.dp_size = grid.dp_size();  // dp rank r of D reads its contiguous B/D samples of each batch
  lo.vocab_size = c.model.vocab_size;
  // Middle pipeline stages read no tokens: they open no dataset (their sources are never called).
  if (!reads_data(model_layout(c, grid, grid.coords()))) {
    const MicroBatchSource none = [](int64_t, int64_t, Tensor&, Tensor&) {
      throw Error("internal: a middle pipeline stage asked for tokens");
    };
    return train_on(c, options, none, c.training.eval_interval > 0 ? none : MicroBatchSource{});
  }
  const auto datasets = open_datasets(c.data);
  auto train_loader = std::make_shared<BatchLoader>(make_split_samples(c.data, datasets, Split::kTrain, T), lo);
  MicroBatchSource valid;
  if (c.training.eval_interval > 0)
    valid = dataset_source(std::make_shared<BatchLoader>(make_split_samples(c.data, datasets, Split::kValid, T), lo));
  return train_on(c, options, dataset_source(train_loader), valid);
}

TrainResult train_on(const Config& c, const TrainOptions& options, const MicroBatchSource& train_data,
                     const MicroBatchSource& valid_data) {
  const auto run_begin = Clock::now();  // the summary's wall time
  RankContext rc;
  init_rank_context(rc, options);
  const RankGrid& grid = rc.grid;
  StopRequest stop_request(c.training, rc.world);  // training.exit_duration_mins counts from here
  const bool rank0 = grid.rank() == 0;
  const ParallelLayout pl = validate_layout(c, grid.world_size());
  const int p = grid.pp_size(), v = pl.virtual_stages, D = grid.dp_size();
  const int m = static_cast<int>(pl.micro_batches);
  const int64_t mb = c.training.micro_batch_size, T = c.model.seq_length;
  const int64_t tokens_per_micro = mb * T, tokens_per_step = c.training.global_batch_size * T;
  // Before anything is built: every path this rank writes is checked now rather than at its first
  // use, and checkpoint.dir is this run's alone until it ends (rank 0 holds its lock).
  check_output_paths(c, options.export_dir, grid.rank());
  std::unique_ptr<CheckpointLock> checkpoint_lock;
  if (!c.checkpoint.dir.empty()) checkpoint_lock = CheckpointLock::acquire_for_job(c.checkpoint.dir, rc.world);

  const ModelStats stats = compute_model_stats(c);
  spdlog::info("model: {} layers, hidden {}, {} heads ({} kv), vocab {}, seq {} — {:.2f}M parameters",
               c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, c.model.num_kv_heads,
               c.model.vocab_size, T, stats.num_params / 1e6);

  const ModelLayout layout = model_layout(c, grid, grid.coords());
  auto params = build_parameters(c, layout);
  // This rank's action lists (training and forward-only evaluation) and the activation slots each
  // chunk needs for them (its peak micro-batches between forward and backward in the list).
  const std::vector<Action> actions = make_schedule(pl.schedule, p, v, m, grid.pp_rank());
  const std::vector<Action> eval_actions = make_forward_only_schedule(p, v, m, grid.pp_rank());
  const ActivationSlots slots = plan_activation_slots(actions, v, m);
  const ActivationSlots eval_slots = plan_activation_slots(eval_actions, v, m);
  const TensorParallel tp{grid.tp_size() > 1 ? rc.tp : nullptr, c.parallel.sequence_parallel};
  std::vector<std::unique_ptr<ModelChunk>> chunks;
  for (int ch = 0; ch < v; ++ch)
    chunks.push_back(std::make_unique<ModelChunk>(c.model, layout, ch, *params, tp, mb, slots.needed[ch]));
  bool has_head = false;
  for (const auto& ch : chunks) has_head = has_head || ch->has_head();

  // Data parallelism: gradient buckets over the dp group; with parallel.distributed_optimizer they
  // reduce_scatter and the optimizer steps this rank's shard (ZeRO-1), else they all_reduce and
  // every rank steps the whole model on the same gradients.
  std::unique_ptr<GradBuckets> buckets;
  const bool sharded = D > 1 && c.parallel.distributed_optimizer;
  if (D > 1) {
    GradBucketOptions bo;
    bo.bucket_size_mb = c.parallel.bucket_size_mb;
    bo.overlap_grad_reduce = c.parallel.overlap_grad_reduce;
    bo.reduce_scatter = sharded;
    buckets = std::make_unique<GradBuckets>(*params, *rc.dp, bo);
  }
  OptimizerOptions oo = optimizer_options(c.optimizer);
  oo.overlap_param_gather = c.parallel.overlap_param_gather;
  const auto optimizer =
      sharded ? std::make_unique<Optimizer>(*buckets, oo) : std::make_unique<Optimizer>(*params, oo);
  // Checkpoints: resume (main parameters, moments, optimizer step; the data source seeks to the
  // step's samples by itself) and, with checkpoint.dir, saves. One process communicates nothing.
  const bool job = grid.world_size() > 1;
  TrainingCheckpoint checkpoint(c, pl, *optimizer, job ? rc.world : nullptr, job && D > 1 ? rc.dp : nullptr);
  const int64_t first_step = checkpoint.resume() + 1;
  MetricsWriter metrics(rank0 ? c.logging.metrics_file : std::string());
  metrics.write_run_start({config_hash(c), first_step - 1, grid.world_size(), c.training.train_iters});
  // training.sample_interval: one process only (validate_layout), so `params` is the whole model.
  std::unique_ptr<TrainingSampler> sampler;
  if (c.training.sample_interval > 0) sampler = std::make_unique<TrainingSampler>(c, *params);
  Tracer tracer(c.logging.trace_file, grid.rank());

  GradSync grad_sync(*params, *rc.tp, c.parallel.sequence_parallel, rc.embedding, c.model.tie_embeddings,
                     buckets.get(), tracer);
  StepBatches batches(m, mb, T, tracer);
  std::vector<std::unique_ptr<ChunkStage>> stages;
  std::vector<PipelineStage*> stage_ptrs;
  for (auto& ch : chunks) {
    // overlap_param_gather: the previous step's parameter all-gathers are waited for bucket by
    // bucket, right before the forward reads them (launched in forward order), not all at once.
    ChunkStage::ParamsNeeded params_needed;
    if (sharded && c.parallel.overlap_param_gather)
      params_needed = [opt = optimizer.get()](const std::vector<size_t>& indices) {
        for (const size_t i : indices) opt->wait_param(i);
      };
    stages.push_back(std::make_unique<ChunkStage>(
        *ch, batches, [&grad_sync](const std::vector<size_t>& indices) { grad_sync.grads_done(indices); },
        std::move(params_needed)));
    stage_ptrs.push_back(stages.back().get());
  }
  PipelineExecutor executor(*rc.pp, tracer);
  const StepGroups groups{rc.tp, rc.dp, rc.pp};
  const GradNorm grad_norm_of(*optimizer, groups);

  if (grid.world_size() > 1) {
    std::string chunk_slots;
    for (int ch = 0; ch < v; ++ch)
      chunk_slots += fmt::format("{}{}", ch ? ", " : "", slots.needed[ch]);
    spdlog::info("layout: tensor {} × pipeline {} × data {}; schedule {}, {} virtual stage(s) per rank, {} "
                 "micro-batch(es) of {} per step per dp rank, activation slots per chunk [{}]; theoretical "
                 "bubble {:.1f}%; {} gradient bucket(s), overlap_grad_reduce {}, distributed optimizer {}",
                 grid.tp_size(), p, D, schedule_kind_name(pl.schedule), v, m, mb, chunk_slots, 100 * pl.bubble,
                 buckets ? buckets->buckets().size() : 0, c.parallel.overlap_grad_reduce ? "on" : "off",
                 sharded ? "on" : "off");
  }

  // This rank's token losses of the step (last pipeline stage only).
  Tensor step_losses = has_head ? Tensor::empty({m * tokens_per_micro}) : Tensor();
  // Gradients are of the global-batch mean loss: every token weighs 1/(tokens in the global batch).
  // GradBuckets reduces to the MEAN over dp (each rank scales by 1/D before the sum), so each rank
  // scales its backward by D/(global tokens): mean over ranks of D × (rank's sum)/(global tokens)
  // = (sum over all tokens)/(global tokens). For D a power of two both scalings are exact in fp32.
  const float grad_scale = static_cast<float>(D) / static_cast<float>(tokens_per_step);

  // Mean token loss over `eval_iters` global batches of the validation split: forward-only passes
  // through the pipeline (each dp rank reads its share of each batch).
  auto evaluate = [&](int64_t step) {
    double sum = 0;
    executor.set_trace_step(-1);  // evaluation forwards: no training step
    for (int64_t it = 0; it < c.training.eval_iters; ++it) {
      batches.begin(valid_data, it, step);
      for (int ch = 0; ch < v; ++ch) stages[ch]->begin_run(eval_slots.slot[ch], -1, step_losses, 0.0f);
      executor.run(eval_actions, stage_ptrs);
      sum += global_mean_loss(step_losses, tokens_per_step, groups);
    }
    return sum / static_cast<double>(c.training.eval_iters);
  };

  TrainResult result;
  result.bubble_theory = p > 1 ? pl.bubble : 0.0;
  int64_t timed_steps = 0, bubble_steps = 0;
  double sum_tokens_per_s = 0, sum_gflops = 0, sum_bubble = 0;
  if (first_step > c.training.train_iters)
    spdlog::info("the checkpoint is at step {}, training.train_iters is {}: nothing left to train", first_step - 1,
                 c.training.train_iters);
  StopDecision stopped;
  int64_t last_step = c.training.train_iters;  // the last step this run takes
  int64_t last_saved = 0;                      // the step of this run's last checkpoint (0 = none)
  const auto loop_begin = Clock::now();        // elapsed time and ETA on the step lines
  for (int64_t step = first_step; step <= c.training.train_iters; ++step) {
    const auto t0 = Clock::now();
    TraceScope step_scope = tracer.scope(tracer.enabled() ? fmt::format("step {}", step) : "", "compute",
                                         {{"step", step}});
    // The distributed optimizer's parameter all-gathers may still be in flight
    // (overlap_param_gather): the forward waits for each bucket right before reading it.
    params->zero_grads();
    batches.begin(train_data, step - 1, step);
    for (int ch = 0; ch < v; ++ch)
      stages[ch]->begin_run(slots.slot[ch], slots.last_backward[ch], step_losses, grad_scale);
    executor.set_trace_step(step);
    const PipelineStepStats pipe = executor.run(actions, stage_ptrs);
    grad_sync.finish();  // tp / embedding sums, then the dp buckets (launched during backward)
    double hidden = -1;
    if (buckets) {
      result.dp_comm_s += buckets->last_stats().comm_s;
      result.dp_wait_s += buckets->last_stats().wait_s;
      hidden = buckets->last_stats().hidden_fraction();
    }
    const double bubble = p > 1 ? measured_bubble(pipe, *rc.pp) : -1;
    const double loss = global_mean_loss(step_losses, tokens_per_step, groups);
    TraceScope norm_scope = tracer.scope("grad norm", "optimizer", {{"step", step}});
    const double grad_norm = grad_norm_of.compute();
    norm_scope.end();
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw Error(fmt::format("step {}: loss {} / grad norm {} is not finite; lower optimizer.lr or set "
                              "optimizer.grad_clip",
                              step, loss, grad_norm));
    }
    const double lr = learning_rate(c.optimizer, c.training.train_iters, step);
    checkpoint.before_optimizer_step();  // an overlapped checkpoint snapshot is taken before values change
    {
      TraceScope s = tracer.scope("optimizer", "optimizer", {{"step", step}});
      optimizer->step(lr, clip_scale(grad_norm, c.optimizer.grad_clip));
    }
    step_scope.end();
    tracer.counter("loss", {{"loss", loss}});
    tracer.counter("grad_norm", {{"grad_norm", grad_norm}});
    const double seconds = seconds_since(t0);

    StepMetrics sm;
    sm.step = step;
    sm.train_iters = c.training.train_iters;
    sm.loss = loss;
    sm.grad_norm = grad_norm;
    sm.lr = lr;
    sm.step_ms = seconds * 1e3;
    sm.data_wait_ms = batches.wait_s() * 1e3;
    sm.tokens_per_s = tokens_per_step / seconds;
    sm.gflops = stats.flops_per_token * tokens_per_step / seconds / 1e9;
    sm.bubble = bubble;
    sm.dp_comm_hidden = hidden;
    sm.elapsed_s = seconds_since(loop_begin);
    sm.eta_s = sm.elapsed_s / static_cast<double>(step - first_step + 1) *
               static_cast<double>(c.training.train_iters - step);
    metrics.write_step(sm);
    if (step % c.logging.log_interval == 0 || step == first_step || step == c.training.train_iters) log_step(sm);
    if (sampler && step % c.training.sample_interval == 0) sampler->log_sample(step);
    if (step == first_step) result.first_loss = loss;
    result.final_loss = loss;

    if (step > first_step || c.training.train_iters == first_step) {
      timed_steps += 1;
      sum_tokens_per_s += sm.tokens_per_s;
      sum_gflops += sm.gflops;
      if (bubble >= 0) {
        bubble_steps += 1;
        sum_bubble += bubble;
      }
    }
    if (valid_data && c.training.eval_interval > 0 && (step % c.training.eval_interval == 0 || step == c.training.train_iters)) {
      TraceScope s = tracer.scope("evaluation", "compute", {{"step", step}});
      optimizer->wait_all();
      result.last_val_loss = evaluate(step);
      s.end();
      spdlog::info("step {:>6} | validation loss {:.4f} (ppl {:.2f})", step, result.last_val_loss,
                   std::exp(result.last_val_loss));
      metrics.write_validation(step, result.last_val_loss);
    }
    // Step boundary: commit a finished background save; agree (all ranks) whether to stop; save
    // every save_interval steps, at the end, and when stopping.
    checkpoint.poll();
    stopped = stop_request.poll(step);
    if (checkpoint.saving() && (checkpoint.save_due(step) || step == c.training.train_iters || stopped)) {
      TraceScope s = tracer.scope("checkpoint", "optimizer", {{"step", step}});
      checkpoint.save(step);
      last_saved = step;
    }
    if (stopped) {
      if (!checkpoint.saving())
        spdlog::warn("stopping after step {} on {}: checkpoint.dir is not set, so nothing is saved", step,
                     stopped.describe(c.training));
      last_step = step;
      break;
    }
  }
  checkpoint.finish();  // the pending save is committed before anything else ends
  if (stopped && checkpoint.saving())
    spdlog::info("stopped by {} after step {}; checkpoint {} saved", stopped.describe(c.training), last_step,
                 iter_dir_name(last_step));
  if (tracer.enabled()) {
    tracer.flush();
    spdlog::info("wrote the trace ({} events) to {}; open it in https://ui.perfetto.dev", tracer.num_events(),
                 tracer.path());
  }
  if (timed_steps > 0) {
    result.mean_tokens_per_s = sum_tokens_per_s / static_cast<double>(timed_steps);
    result.mean_gflops = sum_gflops / static_cast<double>(timed_steps);
  }
  optimizer->wait_all();

  const int64_t steps_run = std::max<int64_t>(0, last_step - first_step + 1);
  RunSummary summary;
  summary.steps = steps_run;
  if (p > 1) {
    result.bubble_measured = bubble_steps > 0 ? sum_bubble / static_cast<double>(bubble_steps) : -1;
    summary.bubble_measured = result.bubble_measured;
    summary.bubble_theory = pl.bubble;
    spdlog::info("pipeline: measured bubble {:.1f}% (mean over steps {}..{}), theoretical {:.1f}% ({} with p={}{}, "
                 "m={})",
                 100 * result.bubble_measured, first_step + 1, last_step, 100 * pl.bubble,
                 schedule_kind_name(pl.schedule), p, v > 1 ? fmt::format(", v={}", v) : "", m);
  }
  if (buckets) {
    const GradReduceStats total{result.dp_comm_s, result.dp_wait_s};
    summary.dp_comm_hidden = total.hidden_fraction();
    summary.dp_comm_s = result.dp_comm_s;
    summary.dp_wait_s = result.dp_wait_s;
    spdlog::info("data parallel: {:.1f}% of the gradient communication hidden behind compute ({:.3f} s outstanding, "
                 "{:.3f} s blocked, over {} steps; buckets launch as backward finishes their gradients{})",
                 100 * total.hidden_fraction(), result.dp_comm_s, result.dp_wait_s, steps_run,
                 c.parallel.overlap_grad_reduce ? "" : " — off: overlap_grad_reduce is false");
  }

  if (!options.export_dir.empty() && last_step < c.training.train_iters) {
    spdlog::info("not exporting to {}: training stopped at step {} of {} (the run that completes it exports)",
                 options.export_dir, last_step, c.training.train_iters);
  } else if (!options.export_dir.empty()) {
    const auto full = gather_full_model(c, grid, *params, *rc.world);
    if (full) {
      export_hf_model(c, *full, options.export_dir);
      spdlog::info("exported the trained model to {} (Hugging Face safetensors + config.json)", options.export_dir);
    }
  }

  summary.tokens = steps_run * tokens_per_step;
  summary.wall_s = seconds_since(run_begin);
  summary.tokens_per_s = result.mean_tokens_per_s;
  summary.gflops = result.mean_gflops;
  // MFU needs the hardware's peak, which the program cannot know: only against logging.peak_gflops.
  if (c.logging.peak_gflops > 0) summary.mfu = result.mean_gflops / (c.logging.peak_gflops * grid.world_size());
  if (steps_run > 0) summary.final_loss = result.final_loss;
  summary.val_loss = result.last_val_loss;
  metrics.write_summary(summary);
  log_run_summary(summary, first_step, last_step, c.training.train_iters,
                  {c.logging.metrics_file, last_saved > 0 ? c.checkpoint.dir + "/" + iter_dir_name(last_saved) : "",
                   last_step == c.training.train_iters ? options.export_dir : "", tracer.path()});
  return result;
}

}  // namespace lattice
