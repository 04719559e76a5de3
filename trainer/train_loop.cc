// The training loop: one process, or one rank of pure data parallelism (tensor = pipeline = 1).
#include "trainer/train_loop.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "checkpoint/hf_interop.h"
#include "data/batch_loader.h"
#include "kernels/ops.h"
#include "model/transformer.h"
#include "parallel/communicator.h"
#include "parallel/distributed_optimizer.h"
#include "parallel/grad_buckets.h"
#include "parallel/trace.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"
#include "trainer/optimizer.h"
#include "trainer/step_readback.h"

namespace lattice {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int dp_size_of(const TrainOptions& o) { return o.dp != nullptr ? o.dp->size() : 1; }

// The global-batch mean of the token losses: this rank's `token_losses` summed in double, the
// per-rank sums gathered over the dp group as exact doubles (communicators carry f32/i32: the
// double's bits travel as two i32) and added in rank order, so every rank gets the same value.
// One process: read_mean_loss, unchanged.
double global_mean_loss(const Tensor& token_losses, Communicator* dp) {
  if (dp == nullptr || dp->size() == 1) return read_mean_loss(token_losses);
  const double local = read_mean_loss(token_losses) * static_cast<double>(token_losses.numel());
  Tensor in = Tensor::empty({2}, DType::kI32);
  Tensor out = Tensor::empty({2 * static_cast<int64_t>(dp->size())}, DType::kI32);
  std::memcpy(in.i32(), &local, sizeof(double));
  dp->all_gather(in, out);
  double total = 0.0;
  for (int r = 0; r < dp->size(); ++r) {
    double part = 0.0;
    std::memcpy(&part, out.i32() + 2 * r, sizeof(double));
    total += part;
  }
  return total / static_cast<double>(token_losses.numel() * dp->size());
}

// Mean token loss over `eval_iters` global batches of the validation split (each dp rank reads
// its share of each batch).
double evaluate(Transformer& model, const MicroBatchSource& source, const Config& c, int64_t micro, Tensor& ids,
                Tensor& targets, Tensor& step_losses, Communicator* dp) {
  const int64_t tokens_per_micro = c.training.micro_batch_size * c.model.seq_length;
  double sum = 0;
  for (int64_t it = 0; it < c.training.eval_iters; ++it) {
    for (int64_t m = 0; m < micro; ++m) {
      source(it, m, ids, targets);
      Tensor losses = step_losses.slice_flat(m * tokens_per_micro, {tokens_per_micro});
      model.forward(ids, targets, losses);
    }
    sum += global_mean_loss(step_losses, dp);
  }
  return sum / static_cast<double>(c.training.eval_iters);
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

}  // namespace

TrainResult train(const Config& c, const TrainOptions& options) {
  validate_for_training(c, dp_size_of(options));
  const int64_t T = c.model.seq_length;
  LoaderOptions lo;
  lo.micro_batch_size = c.training.micro_batch_size;
  lo.global_batch_size = c.training.global_batch_size;
  lo.dp_rank = options.dp != nullptr ? options.dp->rank() : 0;
  lo.dp_size = dp_size_of(options);  // dp rank r of D reads its contiguous B/D samples of each batch
  lo.vocab_size = c.model.vocab_size;
  const auto datasets = open_datasets(c.data);
  auto train_loader = std::make_shared<BatchLoader>(make_split_samples(c.data, datasets, Split::kTrain, T), lo);
  MicroBatchSource valid;
  if (c.training.eval_interval > 0)
    valid = dataset_source(std::make_shared<BatchLoader>(make_split_samples(c.data, datasets, Split::kValid, T), lo));
  return train_on(c, options, dataset_source(train_loader), valid);
}

TrainResult train_on(const Config& c, const TrainOptions& options, const MicroBatchSource& train_data,
                     const MicroBatchSource& valid_data) {
  Communicator* dp = options.dp;
  const int D = dp_size_of(options);
  const bool rank0 = dp == nullptr || dp->rank() == 0;
  const int64_t mb = c.training.micro_batch_size, gb = c.training.global_batch_size;
  LATTICE_CHECK(gb % (mb * D) == 0, "global batch {} is not a multiple of micro-batch {} x data {}", gb, mb, D);
  // Micro-batches per step of this rank: B / (mb × D) (validate_layout checked it is whole).
  const int64_t micro = gb / (mb * D), T = c.model.seq_length;
  const int64_t tokens_per_micro = mb * T, tokens_per_step = gb * T;

  const ModelStats stats = compute_model_stats(c);
  spdlog::info("model: {} layers, hidden {}, {} heads ({} kv), vocab {}, seq {} — {:.2f}M parameters",
               c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, c.model.num_kv_heads,
               c.model.vocab_size, T, stats.num_params / 1e6);

  auto params = build_parameters(c);
  Transformer model(c.model, *params, mb);
  // Data parallelism: gradient buckets over the dp group; with parallel.distributed_optimizer they
  // reduce_scatter and the ZeRO-1 optimizer steps this rank's shard, else they all_reduce and
  // every rank steps the same AdamW on the same gradients.
  std::unique_ptr<GradBuckets> buckets;
  std::unique_ptr<DistributedOptimizer> dist_optimizer;
  if (dp != nullptr) {
    GradBucketOptions bo;
    bo.bucket_size_mb = c.parallel.bucket_size_mb;
    bo.overlap_grad_reduce = c.parallel.overlap_grad_reduce;
    bo.reduce_scatter = c.parallel.distributed_optimizer;
    buckets = std::make_unique<GradBuckets>(*params, *dp, bo);
    if (c.parallel.distributed_optimizer) {
      DistAdamWConfig dc;
      dc.beta1 = c.optimizer.beta1;
      dc.beta2 = c.optimizer.beta2;
      dc.eps = c.optimizer.eps;
      dc.weight_decay = c.optimizer.weight_decay;
      dc.overlap_param_gather = c.parallel.overlap_param_gather;
      dist_optimizer = std::make_unique<DistributedOptimizer>(*buckets, dc);
    }
  }
  std::unique_ptr<AdamW> optimizer;
  if (!dist_optimizer) optimizer = std::make_unique<AdamW>(*params, c.optimizer);
  MetricsWriter metrics(rank0 ? c.logging.metrics_file : std::string());
  Tracer tracer(c.logging.trace_file, options.rank);
  if (D > 1)
    spdlog::info("data parallel: {} ranks, {} micro-batch(es) of {} per rank per step, {} gradient bucket(s), "
                 "overlap_grad_reduce {}, distributed optimizer {}",
                 D, micro, mb, buckets->buckets().size(), c.parallel.overlap_grad_reduce ? "on" : "off",
                 dist_optimizer ? "on" : "off");

  Tensor ids = Tensor::empty({mb, T}, DType::kI32);
  Tensor targets = Tensor::empty({mb, T}, DType::kI32);
  Tensor step_losses = Tensor::empty({micro * tokens_per_micro});  // this rank's tokens of the step
  // Gradients are of the global-batch mean loss: every token weighs 1/(tokens in the global batch).
  // GradBuckets reduces to the MEAN over dp (each rank scales by 1/D before the sum), so each rank
  // scales its backward by D/(global tokens): mean over ranks of D × (rank's sum)/(global tokens)
  // = (sum over all tokens)/(global tokens). For D a power of two both scalings are exact in fp32.
  // One process (D = 1): 1/(global tokens), as before.
  const float grad_scale = static_cast<float>(D) / static_cast<float>(tokens_per_step);

  TrainResult result;
  int64_t timed_steps = 0;
  double sum_tokens_per_s = 0, sum_gflops = 0;
  for (int64_t step = 1; step <= c.training.train_iters; ++step) {
    const auto t0 = Clock::now();
    TraceScope step_scope = tracer.scope(tracer.enabled() ? fmt::format("step {}", step) : "", "compute",
                                         {{"step", step}});
    // The distributed optimizer's parameter all-gather may still be in flight
    // (overlap_param_gather): the forward reads every parameter.
    if (dist_optimizer) dist_optimizer->wait_all();
    params->zero_grads();
    double data_wait_s = 0;  // time the step waited for its micro-batches (prefetch hides the reads)
    for (int64_t m = 0; m < micro; ++m) {
      const auto w0 = Clock::now();
      {
        TraceScope s = tracer.scope("data wait", "data", {{"step", step}, {"microbatch", m}});
        train_data(step - 1, m, ids, targets);
      }
      data_wait_s += seconds_since(w0);
      Tensor losses = step_losses.slice_flat(m * tokens_per_micro, {tokens_per_micro});
      {
        TraceScope s = tracer.scope("forward", "compute", {{"step", step}, {"microbatch", m}, {"chunk", 0}});
        model.forward(ids, targets, losses);
      }
      {
        TraceScope s = tracer.scope("backward", "compute", {{"step", step}, {"microbatch", m}, {"chunk", 0}});
        model.backward(ids, targets, grad_scale);
      }
      if (buckets && m == micro - 1) {
        // The last micro-batch's backward has completed every parameter's gradient. The
        // Transformer has no per-parameter backward hook yet, so all parameters are marked here,
        // in reverse order (the order backward produces them): buckets launch now, after the
        // whole backward, and almost none of the reduction hides behind compute.
        for (size_t p = params->count(); p-- > 0;) buckets->mark_ready(p);
      }
    }
    if (buckets) {
      TraceScope s = tracer.scope("grad reduce wait", "communication", {{"step", step}});
      buckets->finish();
      result.dp_comm_s += buckets->last_stats().comm_s;
      result.dp_wait_s += buckets->last_stats().wait_s;
    }
    const double loss = global_mean_loss(step_losses, dp);
    TraceScope norm_scope = tracer.scope("grad norm", "optimizer", {{"step", step}});
    // Over every parameter exactly once: the distributed optimizer sums the shards' squares over
    // dp; after the all_reduce every rank holds the whole (identical) mean gradient.
    const double grad_norm = dist_optimizer ? dist_optimizer->grad_norm() : global_grad_norm(*params);
    norm_scope.end();
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw Error(fmt::format("step {}: loss {} / grad norm {} is not finite; lower optimizer.lr or set "
                              "optimizer.grad_clip",
                              step, loss, grad_norm));
    }
    const double lr = learning_rate(c.optimizer, c.training.train_iters, step);
    {
      TraceScope s = tracer.scope("optimizer", "optimizer", {{"step", step}});
      const float clip = clip_scale(grad_norm, c.optimizer.grad_clip);
      if (dist_optimizer)
        dist_optimizer->step(lr, clip);
      else
        optimizer->step(*params, lr, clip);
    }
    step_scope.end();
    tracer.counter("loss", {{"loss", loss}});
    tracer.counter("grad_norm", {{"grad_norm", grad_norm}});
    const double seconds = seconds_since(t0);

    StepMetrics m;
    m.step = step;
    m.train_iters = c.training.train_iters;
    m.loss = loss;
    m.grad_norm = grad_norm;
    m.lr = lr;
    m.step_ms = seconds * 1e3;
    m.data_wait_ms = data_wait_s * 1e3;
    m.tokens_per_s = tokens_per_step / seconds;
    m.gflops = stats.flops_per_token * tokens_per_step / seconds / 1e9;
    metrics.write_step(m);
    if (step % c.logging.log_interval == 0 || step == 1 || step == c.training.train_iters) log_step(m);
    if (step == 1) result.first_loss = loss;
    result.final_loss = loss;

    if (step > 1 || c.training.train_iters == 1) {
      timed_steps += 1;
      sum_tokens_per_s += m.tokens_per_s;
      sum_gflops += m.gflops;
    }
    if (valid_data && (step % c.training.eval_interval == 0 || step == c.training.train_iters)) {
      TraceScope s = tracer.scope("evaluation", "compute", {{"step", step}});
      if (dist_optimizer) dist_optimizer->wait_all();
      result.last_val_loss = evaluate(model, valid_data, c, micro, ids, targets, step_losses, dp);
      s.end();
      spdlog::info("step {:>6} | validation loss {:.4f} (ppl {:.2f})", step, result.last_val_loss,
                   std::exp(result.last_val_loss));
      metrics.write_validation(step, result.last_val_loss);
    }
  }
  if (tracer.enabled()) {
    tracer.flush();
    spdlog::info("wrote the trace ({} events) to {}; open it in https://ui.perfetto.dev", tracer.num_events(),
                 tracer.path());
  }
  result.mean_tokens_per_s = sum_tokens_per_s / static_cast<double>(timed_steps);
  result.mean_gflops = sum_gflops / static_cast<double>(timed_steps);
  if (dist_optimizer) dist_optimizer->wait_all();
  if (buckets) {
    const GradReduceStats total{result.dp_comm_s, result.dp_wait_s};
    spdlog::info("data parallel: {:.1f}% of the gradient communication hidden behind compute ({:.3f} s "
                 "outstanding, {:.3f} s blocked; buckets launch after the whole backward, no per-parameter hook)",
                 100 * total.hidden_fraction(), result.dp_comm_s, result.dp_wait_s);
  }
  if (rank0 && !options.export_dir.empty()) {
    export_hf(c.model, *params, options.export_dir);
    spdlog::info("exported the trained model to {} (Hugging Face safetensors + config.json)", options.export_dir);
  }
  return result;
}

}  // namespace lattice
