// The training session: built once, then stepped. Each step runs this rank's action list (the
// configured pipeline schedule; one process is p = v = 1) through the PipelineExecutor, then the
// whole-model math (loss, gradient norm), the optimizer, the metrics and the step boundary.
#include "trainer/training_session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_lock.h"
#include "checkpoint/safetensors.h"
#include "kernels/nvtx_range.h"
#include "kernels/op_profile.h"
#include "parallel/schedule.h"
#include "trainer/device_selection.h"
#include "trainer/export_gather.h"
#include "trainer/hf_export.h"
#include "trainer/lr_schedule.h"
#include "trainer/memory_check.h"
#include "trainer/model_builder.h"
#include "trainer/output_paths.h"
#include "trainer/run_dir.h"
#include "trainer/statistics.h"

namespace lattice {

namespace {

using Clock = std::chrono::steady_clock;

// This process's peak resident set (Linux reports ru_maxrss in KiB).
int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// This process's resident set now (/proc/self/statm: resident pages); 0 when unreadable.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGE_SIZE));
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

TrainingSession::TrainingSession(const Config& c, const TrainOptions& options, MicroBatchSource train_data,
                                 MicroBatchSource valid_data)
    : c_(c),
      options_(options),
      train_data_(std::move(train_data)),
      valid_data_(std::move(valid_data)),
      run_begin_(Clock::now()),
      start_resident_bytes_(resident_bytes()),
      rc_(make_rank_context(options)) {
  const RankGrid& grid = rc_.grid;
  stop_request_ = std::make_unique<StopRequest>(c.training, rc_.world);
  pl_ = validate_layout(c, grid.world_size());
  p_ = grid.pp_size();
  v_ = pl_.virtual_stages;
  D_ = grid.dp_size();
  m_ = static_cast<int>(pl_.micro_batches);
  const int64_t mb = c.training.micro_batch_size, T = c.model.seq_length;
  tokens_per_step_ = c.training.global_batch_size * T;
  // Before anything is built: every path this rank writes is checked now rather than at its first
  // use, and checkpoint.dir is this run's alone until it ends (rank 0 holds its lock).
  open_run_dir(c, grid.rank());  // first: log.txt then also holds a refused output path's error
  check_output_paths_on_every_rank(c, options.export_dir);
  if (!c.checkpoint.dir.empty()) checkpoint_lock_ = CheckpointLock::acquire_for_job(c.checkpoint.dir, rc_.world);

  if (grid.rank() == 0)
    for (const std::string& warning : config_warnings(c, pl_)) spdlog::warn("{}", warning);
  stats_ = compute_model_stats(c);
  spdlog::info("model: {} layers, hidden {}, {} heads ({} kv), vocab {}, seq {} — {:.2f}M parameters",
               c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, c.model.num_kv_heads,
               c.model.vocab_size, T, stats_.num_params / 1e6);

  select_training_device(c);
  start_gemm_autotune(c, grid.rank());
  device_ = std::make_unique<DeviceContext>(config_device(c));
  memory_plan_ = plan_memory(c, pl_, device_attention_workspace(device_->backend(), c, pl_));
  build_model();
  build_optimizer();
  build_chunks();
  // Checkpoints: resume (main parameters, moments, optimizer step; the data source seeks to the
  // step's samples by itself) and, with checkpoint.dir, saves. One process communicates nothing.
  const bool job = grid.world_size() > 1;
  checkpoint_ = std::make_unique<TrainingCheckpoint>(c, pl_, *optimizer_, device_->device(),
                                                     job ? rc_.world : nullptr, job && D_ > 1 ? rc_.dp : nullptr);
  first_step_ = checkpoint_->resume() + 1;
  // The run is accepted (a checkpoint that does not fit the config was refused above): only now does
  // its config replace the run folder's config.json.
  write_run_config(c, grid.rank());
  metrics_ = std::make_unique<MetricsWriter>(grid.rank() == 0 ? c.logging.metrics_file : std::string());
  metrics_->write_run_start({config_hash(c), first_step_ - 1, grid.world_size(), c.training.train_iters,
                             precision_name(c.training.precision), precision_name(c.parallel.grad_reduce_dtype)});
  tensorboard_ = std::make_unique<TensorBoardWriter>(grid.rank() == 0 ? c.logging.tensorboard_dir : std::string(),
                                                     first_step_, c.logging.log_interval);
  // training.sample_interval: one process only (validate_layout), so `params` is the whole model.
  if (c.training.sample_interval > 0) sampler_ = std::make_unique<TrainingSampler>(c, *params_);
  tracer_ = std::make_unique<Tracer>(c.logging.trace_file, grid.rank());
  // One time origin for every rank's trace file: the exit of a world barrier (to its exit skew: see
  // Tracer::align_origin_after_barrier), not each rank's own start-up, so the files line up in
  // Perfetto. The first barrier absorbs the start-up skew (its wait is the watchdog's); every rank
  // then reaches the second at about the same time and polls it without the wait's back-off.
  // Every rank has the same trace_file: all or none enter.
  if (tracer_->enabled() && grid.world_size() > 1) {
    rc_.world->barrier();
    CommHandle origin_barrier = rc_.world->barrier_async();
    tracer_->align_origin_after_barrier(grid.world_size(), [&] { return origin_barrier.test(); });
  }
  // NCCL's operations get lanes of their own (the groups split later, such as the pipeline's lanes, inherit it).
  for (Communicator* g : {rc_.world, rc_.tp, rc_.dp, rc_.pp, rc_.embedding})
    if (g != nullptr) g->set_tracer(tracer_.get());

  build_pipeline();
  log_precision();
  // The batch first: a Megatron or TorchTitan user checks it before anything else.
  spdlog::info("batch: global batch {} = {} micro-batch(es) of {} × data-parallel {}; {} tokens per step",
               c.training.global_batch_size, m_, c.training.micro_batch_size, D_, tokens_per_step_);
  if (grid.world_size() > 1) log_layout();
  // After the optimizer has freed the bf16 init values (the plan's transient), as the plan assumes.
  reserve_attention_workspace(device_->backend(), c, pl_);
  log_memory_plan();

  bool has_head = false;
  for (const auto& ch : chunks_) has_head = has_head || ch->has_head();
  step_losses_ = has_head ? device_->empty({m_ * mb * T}) : Tensor();
  // Gradients are of the global-batch mean loss: every token weighs 1/(tokens in the global batch).
  // GradBuckets reduces to the MEAN over dp (each rank scales by 1/D before the sum), so each rank
  // scales its backward by D/(global tokens): mean over ranks of D × (rank's sum)/(global tokens)
  // = (sum over all tokens)/(global tokens). For D a power of two both scalings are exact in fp32.
  grad_scale_ = static_cast<float>(D_) / static_cast<float>(tokens_per_step_);
}

TrainingSession::~TrainingSession() {
  if (!profiling_) return;
  // A run that ended in an error leaves no profile running for the next one in this process.
  try {
    OpProfile::stop();
  } catch (const std::exception&) {
  }
}

// Every rank checks what it writes; the job agrees, so that a path no rank can write (the usual
// case: one shared filesystem) is reported once, by rank 0, not by every rank before an abort.
void TrainingSession::check_output_paths_on_every_rank(const Config& c, const std::string& export_dir) {
  const int rank = rc_.grid.rank();
  std::string problem;
  try {
    check_output_paths(c, export_dir, rank);
  } catch (const InputError& e) {
    problem = e.what();
  }
  if (rc_.grid.world_size() == 1) {
    if (!problem.empty()) throw InputError(problem);
    return;
  }
  const std::vector<uint8_t> failed = rc_.world->host().all_gather<uint8_t>(problem.empty() ? 0 : 1, "output paths");
  if (std::find(failed.begin(), failed.end(), 1) == failed.end()) return;
  throw AgreedFailure(agreed_failure_message(rank, rc_.grid.world_size(), failed[0] != 0, problem),
                      ExitCode::kBadInput);
}

// This rank's parameters (set by build_optimizer), and the action lists with the activation slots
// each chunk needs for them (its peak micro-batches between forward and backward in the list).
void TrainingSession::build_model() {
  const ModelLayout layout = model_layout(c_, rc_.grid, rc_.grid.coords());
  params_ = rank_parameters(c_, layout, *device_);
  actions_ = make_schedule(pl_.schedule, p_, v_, m_, rc_.grid.pp_rank());
  eval_actions_ = make_forward_only_schedule(p_, v_, m_, rc_.grid.pp_rank());
  const std::vector<int> pools = activation_slot_pools(c_.model, layout);
  slots_ = plan_activation_slots(actions_, v_, m_, pools);
  eval_slots_ = plan_activation_slots(eval_actions_, v_, m_, pools);
}

// The model chunks with their activation slots: after the optimizer, whose start-up scratch (one
// parameter's fp32 init values, bf16 only) is freed before the activations exist.
void TrainingSession::build_chunks() {
  const ModelLayout layout = model_layout(c_, rc_.grid, rc_.grid.coords());
  const TensorParallel tp{rc_.grid.tp_size() > 1 ? rc_.tp : nullptr, c_.parallel.sequence_parallel,
                          device_->stream()};
  for (int ch = 0; ch < v_; ++ch) {
    const int pool = slots_.pool[ch];
    chunks_.push_back(std::make_unique<ModelChunk>(c_.model, layout, ch, *params_, tp, c_.training.micro_batch_size,
                                                   slots_.pool_slots[pool],
                                                   pool != ch ? chunks_[pool].get() : nullptr));
  }
}

void TrainingSession::build_optimizer() {
  // Data parallelism: gradient buckets over the dp group; with parallel.distributed_optimizer they
  // reduce_scatter and the optimizer steps this rank's shard (ZeRO-1), else they all_reduce and
  // every rank steps the whole model on the same gradients.
  sharded_ = D_ > 1 && c_.parallel.distributed_optimizer;
  if (D_ > 1) {
    GradBucketOptions bo;
    bo.bucket_size_mb = c_.parallel.bucket_size_mb;
    bo.overlap_grad_reduce = c_.parallel.overlap_grad_reduce;
    bo.reduce_scatter = sharded_;
    bo.reduce_dtype = precision_dtype(c_.parallel.grad_reduce_dtype);
    buckets_ = std::make_unique<GradBuckets>(*params_, *rc_.dp, bo);
  }
  OptimizerOptions oo = optimizer_options(c_.optimizer);
  oo.overlap_param_gather = c_.parallel.overlap_param_gather;
  // Test only (tests/trainer/master_weights_test.sh): AdamW steps the bf16 copy itself, to show
  // that without fp32 master weights small updates are lost.
  if (const char* off = std::getenv("LATTICE_TEST_DISABLE_MAIN_PARAMS"); off != nullptr && std::string(off) == "1") {
    spdlog::warn("LATTICE_TEST_DISABLE_MAIN_PARAMS=1: the optimizer steps the {} parameter copy, not fp32 master "
                 "weights (a test switch; never train like this)",
                 dtype_name(params_->param_dtype()));
    oo.test_disable_main_params = true;
  }
  optimizer_ = sharded_ ? std::make_unique<Optimizer>(*buckets_, oo) : std::make_unique<Optimizer>(*params_, oo);
  // The fp32 master weights start from the exact fp32 init (or loaded weights), not the rounded
  // copy, one parameter at a time: the rank's parameters never exist in fp32 beside the optimizer's
  // state (Megatron-LM starts its master weights from the bf16 values instead). A resumed run takes
  // its weights from the checkpoint: model.init_from's file (maybe tens of GB) is not read, as
  // Megatron-LM skips --pretrained-checkpoint when --load has a checkpoint.
  Config init = c_;
  if (!init.model.init_from.empty()) {
    if (const std::optional<std::string> resume = checkpoint_to_load(c_.checkpoint)) {
      if (rc_.grid.rank() == 0)
        spdlog::info("model.init_from {} is not read: the run resumes from {}, which holds its weights",
                     init.model.init_from, *resume);
      init.model.init_from.clear();
    }
  }
  initial_values(init, *params_,
                 [this](size_t param, const Tensor& fp32) { optimizer_->set_initial_value(param, fp32); });
}

// Gradient sync, the micro-batches, each chunk as a pipeline stage, the executor and the norm.
void TrainingSession::build_pipeline() {
  grad_sync_ = std::make_unique<GradSync>(*params_, *rc_.tp, c_.parallel.sequence_parallel, rc_.embedding,
                                          c_.model.tie_embeddings, buckets_.get(), *tracer_);
  batches_ = std::make_unique<StepBatches>(m_, c_.training.micro_batch_size, c_.model.seq_length,
                                           c_.model.vocab_size, *device_, *tracer_);
  for (auto& ch : chunks_) {
    // overlap_param_gather: the previous step's parameter all-gathers are waited for bucket by
    // bucket, right before the forward reads them (launched in forward order), not all at once.
    ChunkStage::ParamsNeeded params_needed;
    if (sharded_ && c_.parallel.overlap_param_gather)
      params_needed = [opt = optimizer_.get()](const std::vector<size_t>& indices) {
        for (const size_t i : indices) opt->wait_param(i);
      };
    stages_.push_back(std::make_unique<ChunkStage>(
        *ch, *batches_, [this](const std::vector<size_t>& indices) { grad_sync_->grads_done(indices); },
        std::move(params_needed)));
    stage_ptrs_.push_back(stages_.back().get());
  }
  executor_ = std::make_unique<PipelineExecutor>(*rc_.pp, *tracer_, *device_);
  groups_ = StepGroups{rc_.tp, rc_.dp, rc_.pp};
  grad_norm_ = std::make_unique<GradNorm>(*optimizer_, groups_);
  readback_ = std::make_unique<StepReadback>(*device_, std::max<int64_t>(1, c_.training.eval_iters),
                                             static_cast<int64_t>(optimizer_->norm_grads().size()));
}

void TrainingSession::log_precision() const {
  if (c_.training.precision == Precision::kBf16) {
    spdlog::info("precision: bf16 — bf16 parameter copies and activations, fp32 gradient accumulation, fp32 master "
                 "weights and AdamW moments{}; norm statistics, softmax sums and the loss in fp32",
                 sharded_ ? " (sharded over dp; the refreshed bf16 copies are all-gathered)" : "");
  } else {
    spdlog::info("precision: fp32");
  }
  if (buckets_)
    spdlog::info("data-parallel gradient reduction in {}", precision_name(c_.parallel.grad_reduce_dtype));
}

// The memory plan's table, one log line per row (rank 0 logs; it is the same on every rank).
void TrainingSession::log_memory_plan() const {
  const std::string table = format_memory_plan(memory_plan_, c_, pl_);
  size_t begin = 0;
  while (begin < table.size()) {
    const size_t end = table.find('\n', begin);
    spdlog::info("{}", table.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
}

void TrainingSession::log_layout() const {
  const std::string chunk_slots = activation_slots_text(slots_.pool, slots_.pool_slots);
  spdlog::info("layout: tensor {} × pipeline {} × data {}; schedule {}, {} virtual stage(s) per rank, {} "
               "micro-batch(es) of {} per step per dp rank, activation slots {}; theoretical "
               "bubble {:.1f}%; {} gradient bucket(s), overlap_grad_reduce {}, distributed optimizer {}",
               rc_.grid.tp_size(), p_, D_, schedule_kind_name(pl_.schedule), v_, m_, c_.training.micro_batch_size,
               chunk_slots, 100 * pl_.bubble, buckets_ ? buckets_->buckets().size() : 0,
               c_.parallel.overlap_grad_reduce ? "on" : "off", sharded_ ? "on" : "off");
}

TrainResult TrainingSession::run() {
  result_.bubble_theory = p_ > 1 ? pl_.bubble : 0.0;
  if (first_step_ > c_.training.train_iters)
    spdlog::info("the checkpoint is at step {}, training.train_iters is {}: nothing left to train", first_step_ - 1,
                 c_.training.train_iters);
  last_step_ = c_.training.train_iters;
  loop_begin_ = Clock::now();  // elapsed time and ETA on the step lines
  for (int64_t step = first_step_; step <= c_.training.train_iters; ++step) {
    if (options_.profile_ops && timed_step(step)) {
      if (!profiling_) OpProfile::start(device_->device());
      profiling_ = true;
      result_.profiled_steps += 1;
    }
    const LoggingConfig& g = c_.logging;
    if (g.profile_step_start > 0 && step == std::max(g.profile_step_start, first_step_) && step <= g.profile_step_end)
      profiler_capture(true, step);
    const auto t0 = Clock::now();
    const StepOutcome outcome = train_step(step);
    record(step, outcome, seconds_since(t0));
    if (capturing_ && step == g.profile_step_end) profiler_capture(false, step);
    if (valid_data_ && c_.training.eval_interval > 0 &&
        (step % c_.training.eval_interval == 0 || step == c_.training.train_iters)) {
      const Stream& stream = device_->stream();
      const TraceAnchor anchor = tracer_->anchor(stream);
      optimizer_->wait_all();
      const NvtxRange range(fmt::format("evaluation step={}", step), NvtxKind::kEvaluation);
      result_.last_val_loss = evaluate(step);
      tracer_->span("evaluation", "compute", anchor, anchor.event, stream.record(), {{"step", step}});
      spdlog::info("step {:>6} | validation loss {:.4f} (ppl {:.2f})", step, result_.last_val_loss,
                   std::exp(result_.last_val_loss));
      metrics_->write_validation(step, result_.last_val_loss);
      tensorboard_->write_validation(step, result_.last_val_loss);
    }
    if (end_step(step)) {
      last_step_ = step;
      break;
    }
  }
  if (capturing_) profiler_capture(false, last_step_);  // the run ended inside the range (stopped, or end > train_iters)
  account_optimizer_time();
  if (profiling_) {
    profiling_ = false;
    result_.op_profile = OpProfile::stop();  // waits for the last optimizer step
  }
  checkpoint_->finish();  // the pending save is committed before anything else ends
  if (stopped_ && checkpoint_->saving())
    spdlog::info("stopped by {} after step {}; checkpoint {} saved", stopped_.describe(c_.training), last_step_,
                 iter_dir_name(last_step_));
  if (rc_.grid.rank() == 0) write_stop_report();
  if (tracer_->enabled() && first_step_ > c_.training.train_iters) {
    // Nothing was trained: the file of the run that trained stays as it is.
    spdlog::info("no step trained: {} left as it was", tracer_->path());
  } else if (tracer_->enabled()) {
    tracer_->flush();
    spdlog::info("wrote the trace ({} events) to {}; open it in https://ui.perfetto.dev", tracer_->num_events(),
                 tracer_->path());
  }
  optimizer_->wait_all();
  summarize();
  return result_;
}

void TrainingSession::profiler_capture(bool on, int64_t step) {
  const Backend& backend = device_->backend();
  LATTICE_CHECK(backend.set_profiler_capture != nullptr, "logging.profile_step_start: {} has no profiler API",
                device_name(device_->device()));
  backend.set_profiler_capture(on);
  capturing_ = on;
  if (on) {
    spdlog::info("profiler capture range opened before step {} (cudaProfilerStart; nsys --capture-range=cudaProfilerApi)",
                 step);
  } else {
    spdlog::info("profiler capture range closed after step {} (cudaProfilerStop)", step);
  }
}

// One step: the pipeline (forward, backward, gradient sync overlapped), the whole-model loss and
// gradient norm, the optimizer.
TrainingSession::StepOutcome TrainingSession::train_step(int64_t step) {
  // The step's spans are timed by events on the compute stream: on a GPU they show the device
  // executing the work, not the host launching it.
  const NvtxRange step_range(fmt::format("step {}", step), NvtxKind::kStep);
  const Stream& stream = device_->stream();
  const TraceAnchor anchor = tracer_->anchor(stream);
  const Event step_start = stream.record();
  // The distributed optimizer's parameter all-gathers may still be in flight
  // (overlap_param_gather): the forward waits for each bucket right before reading it.
  params_->zero_grads();
  batches_->begin(train_data_, step - 1, step);
  for (int ch = 0; ch < v_; ++ch)
    stages_[ch]->begin_run(slots_.slot[ch], slots_.last_backward[ch], step_losses_, grad_scale_);
  executor_->set_trace_step(step, anchor);
  const PipelineStepTiming pipe = executor_->run(actions_, stage_ptrs_);
  grad_sync_->finish();  // tp / embedding sums, then the dp buckets (launched during backward)

  StepOutcome out;
  // This rank's loss sum and gradient sums of squares reach the host in the step's one copy.
  if (step_losses_.defined()) readback_->enqueue_loss_sum(0, step_losses_);
  const Event norm_start = stream.record();
  {
    const NvtxRange range("grad norm", NvtxKind::kOptimizer);
    readback_->enqueue_grad_sum_squares(optimizer_->norm_grads());
  }
  const Event norm_end = stream.record();
  tracer_->span("grad norm", "optimizer", anchor, norm_start, norm_end, {{"step", step}});
  read_back();
  // The step's work has completed: its events are read without waiting (before the read-back, each
  // read would have been a host synchronization).
  account_optimizer_time();  // the previous step's optimizer
  if (buckets_) {
    const GradReduceStats dp = buckets_->last_stats();
    result_.dp_comm_s += dp.comm_s;
    result_.dp_wait_s += dp.wait_s;
    out.hidden = dp.hidden_fraction();
  }
  if (p_ > 1) out.bubble = measured_bubble(pipe.stats(), *rc_.pp);
  out.grad_norm = grad_norm_->compute(readback_->grad_sum_squares());
  out.loss = global_mean_loss(readback_->loss_sum(0), tokens_per_step_, groups_);
  if (!std::isfinite(out.loss) || !std::isfinite(out.grad_norm)) {
    throw Error(fmt::format("step {}: loss {} / grad norm {} is not finite; lower optimizer.lr or set "
                            "optimizer.grad_clip",
                            step, out.loss, out.grad_norm));
  }
  out.lr = learning_rate(c_.optimizer, c_.training.train_iters, step);
  checkpoint_->before_optimizer_step();  // an overlapped checkpoint snapshot is taken before values change
  const Event optimizer_start = stream.record();
  // The read-back and the host sums over the ranks (loss, grad norm, bubble): where a rank waits for
  // the slowest, which the trace would otherwise show as an unlabelled gap.
  tracer_->span("read-back and rank sums", "optimizer", anchor, norm_end, optimizer_start, {{"step", step}});
  {
    const NvtxRange range("optimizer", NvtxKind::kOptimizer);
    optimizer_->step(out.lr, clip_scale(out.grad_norm, c_.optimizer.grad_clip));
  }
  const Event step_end = stream.record();
  optimizer_events_ = {step, optimizer_start, step_end};
  tracer_->span("optimizer", "optimizer", anchor, optimizer_start, step_end, {{"step", step}});
  if (tracer_->enabled())
    tracer_->span(fmt::format("step {}", step), "compute", anchor, step_start, step_end, {{"step", step}});
  tracer_->counter("loss", {{"loss", out.loss}});
  tracer_->counter("grad_norm", {{"grad_norm", out.grad_norm}});
  // overlap_param_gather: the write-back's all-gathers left in flight for the next forward.
  if (sharded_) tracer_->counter("param_gathers_in_flight", {{"gathers", optimizer_->pending_param_gathers()}});
  return out;
}

// The host's one wait on the device per step (or evaluation). Communication the device was ordered
// after but no host has waited for (NCCL) is waited for first, under the watchdog: a hang there
// ends the job with the watchdog's message instead of blocking this copy without a timeout. It has
// completed, or is about to, by the time the read-back's data is ready anyway.
void TrainingSession::read_back() {
  rc_.world->watchdog().wait_in_flight();
  readback_->read();
}

// Mean token loss over `eval_iters` global batches of the validation split: forward-only passes
// through the pipeline (each dp rank reads its share of each batch). Each batch's loss sum goes to
// its own slot: the pass reads back once.
double TrainingSession::evaluate(int64_t step) {
  executor_->set_trace_step(-1);  // evaluation forwards: no training step
  for (int64_t it = 0; it < c_.training.eval_iters; ++it) {
    batches_->begin(valid_data_, it, step);
    for (int ch = 0; ch < v_; ++ch) stages_[ch]->begin_run(eval_slots_.slot[ch], -1, step_losses_, std::nullopt);
    executor_->run(eval_actions_, stage_ptrs_);
    if (step_losses_.defined()) readback_->enqueue_loss_sum(it, step_losses_);
  }
  read_back();
  double sum = 0;
  for (int64_t it = 0; it < c_.training.eval_iters; ++it)
    sum += global_mean_loss(readback_->loss_sum(it), tokens_per_step_, groups_);
  return sum / static_cast<double>(c_.training.eval_iters);
}

// The step's metrics line, log line and sample, and the running throughput means.
void TrainingSession::record(int64_t step, const StepOutcome& o, double seconds) {
  const int64_t train_iters = c_.training.train_iters;
  StepMetrics sm;
  sm.step = step;
  sm.train_iters = train_iters;
  sm.loss = o.loss;
  sm.grad_norm = o.grad_norm;
  sm.lr = o.lr;
  sm.step_ms = seconds * 1e3;
  sm.data_wait_ms = batches_->wait_s() * 1e3;
  sm.tokens_per_s = tokens_per_step_ / seconds;
  sm.gflops = stats_.flops_per_token * tokens_per_step_ / seconds / 1e9;
  sm.bubble = o.bubble;
  sm.dp_comm_hidden = o.hidden;
  sm.elapsed_s = seconds_since(loop_begin_);
  sm.eta_s = sm.elapsed_s / static_cast<double>(step - first_step_ + 1) * static_cast<double>(train_iters - step);
  metrics_->write_step(sm);
  tensorboard_->write_step(sm);
  progress_.add(sm);
  if (step % c_.logging.log_interval == 0 || step == first_step_ || step == train_iters) progress_.log();
  if (sampler_ && step % c_.training.sample_interval == 0) sampler_->log_sample(step);
  if (step == first_step_) result_.first_loss = o.loss;
  result_.final_loss = o.loss;

  if (timed_step(step)) {
    throughput_.steps += 1;
    throughput_.seconds += seconds;
    throughput_.step_s.push_back(seconds);
    if (o.bubble >= 0) {
      throughput_.bubble_steps += 1;
      throughput_.bubble += o.bubble;
    }
  }
}

// LATTICE_STOP_REPORT, when set (tools/slurm/lattice.sbatch sets it): the file rank 0 writes how the
// run ended, one line, for a launcher deciding whether to requeue the job: "resumable STEP" (stopped
// before train_iters, that step's checkpoint committed), "unsaved STEP" (stopped before train_iters
// without checkpoint.dir: a requeued job would start from step 1 again) or "finished STEP".
void TrainingSession::write_stop_report() const {
  const char* file = std::getenv("LATTICE_STOP_REPORT");
  if (file == nullptr || *file == '\0') return;
  const char* how = !stopped_ ? "finished" : checkpoint_->saving() ? "resumable" : "unsaved";
  try {
    write_file_atomically(file, fmt::format("{} {}\n", how, last_step_));
  } catch (const Error& e) {
    spdlog::warn("LATTICE_STOP_REPORT: {} (the launcher cannot tell how the run ended)", e.what());
  }
}

bool TrainingSession::end_step(int64_t step) {
  checkpoint_->poll();
  stopped_ = stop_request_->poll(step);
  if (checkpoint_->saving() && (checkpoint_->save_due(step) || step == c_.training.train_iters || stopped_)) {
    const NvtxRange range(fmt::format("checkpoint step={}", step), NvtxKind::kOptimizer);
    TraceScope s = tracer_->scope("checkpoint", "optimizer", {{"step", step}});
    checkpoint_->save(step);
    last_saved_ = step;
  }
  if (stopped_ && !checkpoint_->saving())
    spdlog::warn("stopping after step {} on {}: checkpoint.dir is not set, so nothing is saved", step,
                 stopped_.describe(c_.training));
  return static_cast<bool>(stopped_);
}

// Predicted against measured peak memory, per rank, the largest logged: the memory plan (what the
// run allocates, item by item) next to the storage high mark (every tensor this process allocated:
// host storage on CPU, the memory pool on GPU) and the peak RSS, which adds the program, its
// libraries and MPI's buffers. A collective: every rank calls it.
void TrainingSession::report_memory(RunSummary& summary) {
  // predicted: the plan, plus on the CPU the process as it was before the run allocated anything
  // (the program, its libraries — the CUDA libraries of a --config=cuda build among them — and MPI).
  struct RankPeak {
    int64_t predicted = 0, predicted_storage = 0, allocated = 0, rss = 0, start_rss = 0;
    int64_t outside_pool = -1;  // GPU: the device's memory in use beyond the pool, at the end of the run
  };
  const MemoryPlan& plan = memory_plan_;
  const RankMemoryPlan& own = plan.ranks[static_cast<size_t>(rc_.grid.pp_rank())];
  const Backend& backend = device_->backend();
  const bool on_cpu = device_->device() == Device::kCpu;
  const RankPeak mine{own.total_bytes + (on_cpu ? start_resident_bytes_ : 0), own.storage_bytes,
                      static_cast<int64_t>(on_cpu ? Storage::host_peak_bytes() : backend.peak_memory_bytes()),
                      peak_resident_bytes(), start_resident_bytes_,
                      backend.memory_outside_pool_bytes != nullptr
                          ? static_cast<int64_t>(backend.memory_outside_pool_bytes())
                          : int64_t{-1}};
  const std::vector<RankPeak> all =
      rc_.grid.world_size() > 1 ? rc_.world->host().all_gather(mine, "memory report") : std::vector<RankPeak>{mine};
  size_t worst = 0;  // the rank with the largest tensor storage high mark
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r].allocated > all[worst].allocated) worst = r;
  const auto gib = [](int64_t b) { return static_cast<double>(b) / double(1 << 30); };
  const auto off = [](int64_t measured, int64_t predicted) {
    return predicted > 0 ? 100.0 * (static_cast<double>(measured) / static_cast<double>(predicted) - 1) : 0.0;
  };
  const RankPeak& w = all[worst];
  if (on_cpu) {
    spdlog::info("memory{}: predicted peak {:.3f} GiB (tensors {:.3f} GiB, MPI's temporaries {:.3f} GiB, the process "
                 "before the run {:.3f} GiB); measured: tensors {:.3f} GiB ({:+.1f}%), peak RSS {:.3f} GiB ({:+.1f}%)",
                 all.size() > 1 ? fmt::format(" (rank {}, the largest)", worst) : "", gib(w.predicted),
                 gib(w.predicted_storage), gib(w.predicted - w.predicted_storage - w.start_rss), gib(w.start_rss),
                 gib(w.allocated), off(w.allocated, w.predicted_storage), gib(w.rss), off(w.rss, w.predicted));
  } else {
    spdlog::info("memory{}: predicted peak {:.3f} GiB on the {}; measured: the memory pool's high mark {:.3f} GiB "
                 "({:+.1f}%); peak host RSS {:.3f} GiB{}",
                 all.size() > 1 ? fmt::format(" (rank {}, the largest)", worst) : "", gib(w.predicted),
                 device_name(device_->device()), gib(w.allocated), off(w.allocated, w.predicted), gib(w.rss),
                 w.outside_pool < 0 ? ""
                                    : fmt::format("; in use beyond the pool at the end, not in the plan: {:.3f} GiB "
                                                  "(the CUDA context, cuBLASLt and cuDNN, NCCL's buffers, any other "
                                                  "process on this GPU)",
                                                  gib(w.outside_pool)));
  }
  // The job's largest figures: what has to fit on a node's most loaded rank.
  int64_t predicted = 0, rss = 0, start_rss = 0;
  for (const RankPeak& r : all) {
    predicted = std::max(predicted, r.predicted);
    rss = std::max(rss, r.rss);
    start_rss = std::max(start_rss, r.start_rss);
  }
  if (on_cpu) summary.start_host_bytes = static_cast<double>(start_rss);
  summary.peak_host_bytes = static_cast<double>(rss);
  summary.predicted_peak_bytes = static_cast<double>(predicted);
  summary.predicted_storage_bytes = static_cast<double>(w.predicted_storage);
  summary.peak_allocated_bytes = static_cast<double>(w.allocated);
  if (!on_cpu) summary.peak_device_bytes = static_cast<double>(w.allocated);
  summary.device_outside_pool_bytes = static_cast<double>(w.outside_pool);
  result_.peak_host_bytes = static_cast<double>(mine.rss);
  if (!on_cpu) result_.peak_device_bytes = static_cast<double>(mine.allocated);
  result_.device_outside_pool_bytes = static_cast<double>(mine.outside_pool);
}

bool TrainingSession::timed_step(int64_t step) const {
  return step > first_step_ || c_.training.train_iters == first_step_;
}

// The optimizer's time is read from its events only once they have completed, so that a GPU step
// gains no synchronization: at the next step's read-back or at the end of the run.
void TrainingSession::account_optimizer_time() {
  if (!optimizer_events_.end.recorded()) return;
  optimizer_events_.end.synchronize();
  if (timed_step(optimizer_events_.step)) {
    throughput_.optimizer_s.push_back(optimizer_events_.end.seconds_since(optimizer_events_.start));
  }
  optimizer_events_ = {};
}

// The run's figures: log lines, the metrics file's summary, the export.
void TrainingSession::summarize() {
  // The timed steps' tokens over their time (a mean of per-step rates would weigh a fast step as
  // much as a slow one and overstate the throughput whenever step times vary).
  if (throughput_.steps > 0 && throughput_.seconds > 0) {
    result_.tokens_per_s = static_cast<double>(throughput_.steps * tokens_per_step_) / throughput_.seconds;
    result_.gflops = stats_.flops_per_token * result_.tokens_per_s / 1e9;
  }
  result_.median_step_s = median(throughput_.step_s);
  result_.median_optimizer_s = median(throughput_.optimizer_s);
  const int64_t steps_run = std::max<int64_t>(0, last_step_ - first_step_ + 1);
  RunSummary summary;
  summary.steps = steps_run;
  if (p_ > 1) {
    result_.bubble_measured =
        throughput_.bubble_steps > 0 ? throughput_.bubble / static_cast<double>(throughput_.bubble_steps) : -1;
    summary.bubble_measured = result_.bubble_measured;
    summary.bubble_theory = pl_.bubble;
    spdlog::info("pipeline: measured bubble {:.1f}% (mean over steps {}..{}), theoretical {:.1f}% ({} with p={}{}, "
                 "m={})",
                 100 * result_.bubble_measured, first_step_ + 1, last_step_, 100 * pl_.bubble,
                 schedule_kind_name(pl_.schedule), p_, v_ > 1 ? fmt::format(", v={}", v_) : "", m_);
  }
  if (buckets_) {
    const GradReduceStats total{result_.dp_comm_s, result_.dp_wait_s};
    summary.dp_comm_hidden = total.hidden_fraction();
    summary.dp_comm_s = result_.dp_comm_s;
    summary.dp_wait_s = result_.dp_wait_s;
    spdlog::info("data parallel: {:.1f}% of the gradient communication hidden behind compute ({:.3f} s outstanding, "
                 "{:.3f} s blocked, over {} steps; buckets launch as backward finishes their gradients{})",
                 100 * total.hidden_fraction(), result_.dp_comm_s, result_.dp_wait_s, steps_run,
                 c_.parallel.overlap_grad_reduce ? "" : " — off: overlap_grad_reduce is false");
  }
  summary.precision = precision_name(c_.training.precision);
  summary.grad_reduce_dtype = precision_name(c_.parallel.grad_reduce_dtype);
  report_memory(summary);  // before the export, whose whole-model copy is not the training run's memory
  export_model();

  summary.tokens = steps_run * tokens_per_step_;
  summary.wall_s = seconds_since(run_begin_);
  if (throughput_.steps > 0) {
    summary.timed_steps = throughput_.steps;
    summary.tokens_per_s = result_.tokens_per_s;
    summary.gflops = result_.gflops;
    // MFU needs the hardware's peak, which the program cannot know: only against logging.peak_gflops.
    if (c_.logging.peak_gflops > 0)
      summary.mfu = result_.gflops / (c_.logging.peak_gflops * rc_.grid.world_size());
  }
  if (steps_run > 0) summary.final_loss = result_.final_loss;
  summary.val_loss = result_.last_val_loss;
  metrics_->write_summary(summary);
  tensorboard_->write_summary(summary, last_step_);
  const int64_t train_iters = c_.training.train_iters;
  log_run_summary(summary, first_step_, last_step_, train_iters,
                  {c_.logging.metrics_file, last_saved_ > 0 ? c_.checkpoint.dir + "/" + iter_dir_name(last_saved_) : "",
                   last_step_ == train_iters ? options_.export_dir : "", tracer_->path(), tensorboard_->path()});
}

void TrainingSession::export_model() {
  if (options_.export_dir.empty()) return;
  if (last_step_ < c_.training.train_iters) {
    spdlog::info("not exporting to {}: training stopped at step {} of {} (the run that completes it exports)",
                 options_.export_dir, last_step_, c_.training.train_iters);
    return;
  }
  // The fp32 master weights are the model (under bf16 the compute copy is their rounding).
  const auto full = gather_full_model(c_, rc_.grid, *params_, optimizer_->gather_main_params(), *rc_.world);
  if (full) {
    export_hf_model(c_, *full, options_.export_dir, options_.export_dtype);
    spdlog::info("exported the trained model to {} (Hugging Face safetensors + config.json)", options_.export_dir);
  }
}

}  // namespace lattice
