// The single-process training loop.
#include "trainer/train_loop.h"

#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "checkpoint/hf_interop.h"
#include "data/batch_loader.h"
#include "kernels/ops.h"
#include "model/transformer.h"
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

// Mean token loss over `eval_iters` global batches of the validation split.
double evaluate(Transformer& model, const MicroBatchSource& source, const Config& c, Tensor& ids,
                Tensor& targets, Tensor& step_losses) {
  const int64_t mb = c.training.micro_batch_size, micro = c.training.num_micro_batches();
  const int64_t tokens_per_micro = mb * c.model.seq_length;
  double sum = 0;
  for (int64_t it = 0; it < c.training.eval_iters; ++it) {
    for (int64_t m = 0; m < micro; ++m) {
      source(it, m, ids, targets);
      Tensor losses = step_losses.slice_flat(m * tokens_per_micro, {tokens_per_micro});
      model.forward(ids, targets, losses);
    }
    sum += read_mean_loss(step_losses);
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
  validate_for_training(c);
  const int64_t T = c.model.seq_length;
  LoaderOptions lo;
  lo.micro_batch_size = c.training.micro_batch_size;
  lo.global_batch_size = c.training.global_batch_size;
  lo.dp_rank = 0;
  lo.dp_size = 1;  // the single-process trainer; a DP rank r of D passes its own here
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
  const int64_t mb = c.training.micro_batch_size, gb = c.training.global_batch_size;
  const int64_t micro = c.training.num_micro_batches(), T = c.model.seq_length;
  const int64_t tokens_per_micro = mb * T, tokens_per_step = gb * T;

  const ModelStats stats = compute_model_stats(c);
  spdlog::info("model: {} layers, hidden {}, {} heads ({} kv), vocab {}, seq {} — {:.2f}M parameters",
               c.model.num_layers, c.model.hidden_size, c.model.num_attention_heads, c.model.num_kv_heads,
               c.model.vocab_size, T, stats.num_params / 1e6);

  auto params = build_parameters(c);
  Transformer model(c.model, *params, mb);
  AdamW optimizer(*params, c.optimizer);
  MetricsWriter metrics(c.logging.metrics_file);
  Tracer tracer(c.logging.trace_file, /*rank=*/0);  // the single-process trainer is rank 0

  Tensor ids = Tensor::empty({mb, T}, DType::kI32);
  Tensor targets = Tensor::empty({mb, T}, DType::kI32);
  Tensor step_losses = Tensor::empty({tokens_per_step});
  // Gradients are of the global-batch mean loss: every token weighs 1/(tokens in the batch).
  const float grad_scale = 1.0f / static_cast<float>(tokens_per_step);

  TrainResult result;
  int64_t timed_steps = 0;
  double sum_tokens_per_s = 0, sum_gflops = 0;
  for (int64_t step = 1; step <= c.training.train_iters; ++step) {
    const auto t0 = Clock::now();
    TraceScope step_scope = tracer.scope(tracer.enabled() ? fmt::format("step {}", step) : "", "compute",
                                         {{"step", step}});
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
    }
    const double loss = read_mean_loss(step_losses);
    TraceScope norm_scope = tracer.scope("grad norm", "optimizer", {{"step", step}});
    const double grad_norm = global_grad_norm(*params);
    norm_scope.end();
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      throw Error(fmt::format("step {}: loss {} / grad norm {} is not finite; lower optimizer.lr or set "
                              "optimizer.grad_clip",
                              step, loss, grad_norm));
    }
    const double lr = learning_rate(c.optimizer, c.training.train_iters, step);
    {
      TraceScope s = tracer.scope("optimizer", "optimizer", {{"step", step}});
      optimizer.step(*params, lr, clip_scale(grad_norm, c.optimizer.grad_clip));
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
      result.last_val_loss = evaluate(model, valid_data, c, ids, targets, step_losses);
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
  if (!options.export_dir.empty()) {
    export_hf(c.model, *params, options.export_dir);
    spdlog::info("exported the trained model to {} (Hugging Face safetensors + config.json)", options.export_dir);
  }
  return result;
}

}  // namespace lattice
