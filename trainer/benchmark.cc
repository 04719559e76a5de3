// Training-step throughput against the measured GEMM peak of the device it trains on (in the run's
// precision), and on a GPU against its datasheet peak too.
#include "trainer/benchmark.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/backend.h"
#include "kernels/blas_runtime.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "trainer/device_selection.h"
#include "trainer/gpu_spec.h"
#include "trainer/launcher_env.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"
#include "trainer/op_profile_report.h"
#include "trainer/statistics.h"
#include "trainer/train_loop.h"

namespace lattice {

namespace {

// GEMM GFLOP/s of ops::matmul on the device with operands in `dtype`, timed with its events: the
// median of 10 products of n×n matrices of random values (zeros run faster than real data) after 3
// warm-ups.
double measure_matmul_gflops(Device device, DType dtype, int64_t n) {
  const DeviceContext ctx(device);
  Tensor host = Tensor::empty({n, n});
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = dist(gen);
  Tensor a = ctx.empty({n, n}, dtype);
  ops::cast(ctx.to_device(host), a);
  const Tensor b = a;
  Tensor c = ctx.empty({n, n}, dtype);
  for (int i = 0; i < 3; ++i) ops::matmul(a, false, b, false, c);
  std::vector<double> seconds;
  for (int i = 0; i < 10; ++i) {
    const Event start = ctx.stream().record();
    ops::matmul(a, false, b, false, c);
    const Event end = ctx.stream().record();
    end.synchronize();
    seconds.push_back(end.seconds_since(start));
  }
  return 2.0 * n * n * n / median(seconds) / 1e9;
}

// The peak the step is measured against: the host's sgemm (OpenBLAS), or the device's GEMM in the
// run's precision (bf16, or f32 / TF32 as training.tf32 set it).
double measure_peak_gflops(Device device, bool bf16) {
  if (device == Device::kCpu) return measure_sgemm_peak_gflops();
  return measure_matmul_gflops(device, bf16 ? DType::kBF16 : DType::kF32, 8192);
}

// The datasheet's dense peak of the device's model in the run's precision (its gpu_spec preset);
// 0 when the model has no preset.
double datasheet_peak_flops(const std::string& preset, const Config& c) {
  if (preset.empty()) return 0;
  const GpuSpec s = gpu_spec(preset);
  if (c.training.precision == Precision::kBf16) return s.peak_bf16_flops;
  return c.training.tf32 && s.peak_tf32_flops > 0 ? s.peak_tf32_flops : s.peak_fp32_flops;
}

// FLOP with the unit that keeps 4 significant digits in view: "869.2 MFLOP", "1.234 GFLOP", "52.1 kFLOP".
std::string format_flop(double flop) {
  const char* units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP"};
  int u = 0;
  while (u < 4 && std::abs(flop) >= 1000) {
    flop /= 1000;
    ++u;
  }
  return fmt::format("{:.4g} {}", flop, units[u]);
}

// bench --config under mpirun or srun: one benchmark per task, each competing for the cores. A
// launcher's world of one task is one process like any other.
void check_bench_is_one_process() {
  const LauncherTasks launched = launcher_tasks();
  if (launched.tasks <= 1) return;
  throw InputError(fmt::format(
      "lattice bench --config times one process, but the launcher started {} ({}={}): each would run a "
      "benchmark of its own, all competing for the same cores. Run it without mpirun/srun; to measure a "
      "parallel layout, train it: `mpirun -np {} lattice train --config ...` prints tokens/s, the pipeline "
      "bubble and the hidden share of data-parallel communication; to measure the links between ranks, "
      "`mpirun -np {} lattice bench --comm`",
      launched.tasks, launched.variable, launched.tasks, launched.tasks, launched.tasks));
}

Config scratch_benchmark_config(Config c, int64_t steps, const std::string& trace_file) {
  c.training.train_iters = steps;
  c.optimizer.warmup_iters = 0;
  c.optimizer.decay_iters = 0;
  // Nothing of the user's run: no run folder (config.json, log.txt), no metrics, TensorBoard or trace
  // file (those resolve_run_dir placed in it included), no checkpoint to resume from or to save.
  c.logging.run_dir.clear();
  c.logging.metrics_file.clear();
  c.logging.tensorboard_dir.clear();
  c.logging.trace_file = trace_file;
  c.checkpoint.dir.clear();
  c.checkpoint.load = "none";
  c.checkpoint.save_interval = 0;
  // Every step runs: nothing stops the run early, and no sample or evaluation runs between steps.
  c.training.exit_interval = 0;
  c.training.exit_duration_mins = 0;
  c.training.sample_interval = 0;
  c.training.eval_interval = 0;
  return c;
}

// training.gemm_autotune_dir, on a GPU: the benchmark tunes into a scratch directory of its own,
// removed at the end, so that it neither reads nor adds to the run's choices yet still times the
// tuned GEMMs.
class ScratchAutotuneDir {
 public:
  explicit ScratchAutotuneDir(Config& c) {
    if (c.training.gemm_autotune_dir.empty() || config_device(c) == Device::kCpu) return;
    std::string pattern = (std::filesystem::temp_directory_path() / "lattice-bench-autotune-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw Error(fmt::format("lattice bench: cannot create a scratch training.gemm_autotune_dir {}: {}", pattern,
                              std::strerror(errno)));
    dir_ = pattern;
    c.training.gemm_autotune_dir = dir_;
  }
  ~ScratchAutotuneDir() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchAutotuneDir(const ScratchAutotuneDir&) = delete;
  ScratchAutotuneDir& operator=(const ScratchAutotuneDir&) = delete;

 private:
  std::string dir_;
};

}  // namespace

int run_benchmark(Config config, int64_t steps, bool profile_ops, const std::string& trace_file) {
  check_bench_is_one_process();
  if (steps < kMinBenchSteps)
    throw InputError(fmt::format("--steps {}: lattice bench needs at least {} steps, a warm-up step and {} timed "
                                 "ones (its figures are medians over the timed steps)",
                                 steps, kMinBenchSteps, kMinBenchSteps - 1));
  Config c = scratch_benchmark_config(std::move(config), steps, trace_file);
  const ScratchAutotuneDir autotune(c);
  const Device device = config_device(c);
  select_training_device(c);
  const bool bf16 = c.training.precision == Precision::kBf16;
  const std::string peak_name = device == Device::kCpu ? "sgemm peak GFLOP/s (measured)"
                                : bf16                ? "GPU bf16 GEMM GFLOP/s (measured)"
                                : c.training.tf32     ? "GPU TF32 GEMM GFLOP/s (measured)"
                                                      : "GPU f32 GEMM GFLOP/s (measured)";
  if (device == Device::kCpu) spdlog::info("BLAS: {}", blas_kernel_description());
  const double peak_before = measure_peak_gflops(device, bf16);

  // Synthetic tokens: throughput does not depend on their values. The steps whose tokens were read
  // are the steps that ran.
  const int32_t vocab = static_cast<int32_t>(c.model.vocab_size);
  std::set<int64_t> steps_read;
  MicroBatchSource synthetic = [vocab, &steps_read](int64_t g, int64_t m, Tensor& ids, Tensor& targets) {
    steps_read.insert(g);
    std::mt19937 rng(static_cast<uint32_t>(g * 1009 + m));
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      ids.i32()[i] = token(rng);
      targets.i32()[i] = token(rng);
    }
  };
  TrainOptions options;
  options.profile_ops = profile_ops;
  TrainResult r = train_on(c, options, synthetic, MicroBatchSource{});
  const double peak_after = measure_peak_gflops(device, bf16);
  const double peak = std::max(peak_before, peak_after);
  const ModelStats stats = compute_model_stats(c);

  // Every figure below is a ratio over the timed steps: none is printed unless at least
  // kMinBenchSteps - 1 steps were timed and every denominator is a real, positive time.
  const int64_t steps_ran = static_cast<int64_t>(steps_read.size());
  const int64_t steps_timed = steps_ran - 1;  // the first is warm-up
  if (steps_timed < kMinBenchSteps - 1)
    throw Error(fmt::format("lattice bench: {} of the {} steps ran, so {} were timed after the warm-up step: too few "
                            "for tokens/s and the peak shares (they need {}); nothing is reported",
                            steps_ran, steps, std::max<int64_t>(steps_timed, 0), kMinBenchSteps - 1));
  // What `lattice plan --gpu FILE` needs to predict this device: the peak, the share of it the
  // forward + backward reach, and the optimizer's memory bandwidth. From the medians of the timed
  // steps, so that one step the machine stalled does not skew the calibration.
  const double compute_s = r.median_step_s - r.median_optimizer_s;
  for (const auto& [name, value] : {std::pair<const char*, double>{"tokens/s", r.tokens_per_s},
                                    {"achieved GFLOP/s", r.gflops},
                                    {"the measured peak GFLOP/s", peak},
                                    {"the forward + backward's median time", compute_s},
                                    {"the optimizer step's median time", r.median_optimizer_s}}) {
    if (!(std::isfinite(value) && value > 0))
      throw Error(fmt::format("lattice bench: {} came out as {} over {} timed steps, so the ratios built on it "
                              "would be meaningless; nothing is reported: run it again, with more --steps",
                              name, value, steps_timed));
  }
  const double efficiency = stats.flops_per_iter / compute_s / (peak * 1e9);
  const double bandwidth = kOptimizerBytesPerParam * double(stats.num_params) / r.median_optimizer_s;

  std::printf("\n== lattice bench: %lld layers, hidden %lld, heads %lld, vocab %lld, seq %lld, micro-batch %lld, %s ==\n",
              (long long)c.model.num_layers, (long long)c.model.hidden_size, (long long)c.model.num_attention_heads,
              (long long)c.model.vocab_size, (long long)c.model.seq_length, (long long)c.training.micro_batch_size,
              device_name(device));
  if (device == Device::kCpu) std::printf("BLAS kernel                  : %s\n", blas_kernel_description().c_str());
  std::printf("parameters                   : %.2f M\n", stats.num_params / 1e6);
  std::printf("training FLOPs per token     : %s (6*N_matmul + attention)\n", format_flop(stats.flops_per_token).c_str());
  if (steps_ran < steps) {
    std::printf("steps timed                  : %lld (after 1 warm-up step; stopped after step %lld of %lld)\n",
                (long long)steps_timed, (long long)steps_ran, (long long)steps);
  } else {
    std::printf("steps timed                  : %lld (after 1 warm-up step)\n", (long long)steps_timed);
  }
  std::printf("tokens/s                     : %.1f\n", r.tokens_per_s);
  std::printf("achieved GFLOP/s (whole step): %.1f\n", r.gflops);
  std::printf("%-29s: %.1f (before %.1f, after %.1f)\n", peak_name.c_str(), peak, peak_before, peak_after);
  std::printf("ratio achieved / peak        : %.1f%%%s\n", 100.0 * r.gflops / peak,
              device == Device::kCpu ? " (target >= 50%)" : "");
  if (device != Device::kCpu) {
    // MFU as vendors and Megatron state it: model FLOPs over the datasheet's dense peak.
    const Backend& backend = backend_for("bench", device);
    const std::string model = backend.device_model != nullptr ? backend.device_model() : "";
    const double datasheet = datasheet_peak_flops(gpu_preset_of_model(model), c);
    if (datasheet > 0) {
      std::printf("MFU vs the datasheet peak    : %.1f%% of %.0f TFLOP/s (%s, %s, dense)\n",
                  100.0 * r.gflops * 1e9 / datasheet, datasheet / 1e12, model.c_str(),
                  bf16 ? "bf16" : c.training.tf32 ? "TF32" : "f32");
    } else {
      std::printf("MFU vs the datasheet peak    : not known for '%s' (presets: h100, h200, a100 SXM)\n", model.c_str());
    }
  }
  std::printf("forward + backward           : %.3f s per step (median), %.1f%% of the peak\n", compute_s,
              100 * efficiency);
  std::printf("optimizer step               : %.3f s per step (median; %.2f GB/s at %.0f B/parameter)\n",
              r.median_optimizer_s, bandwidth / 1e9, kOptimizerBytesPerParam);
  if (c.training.precision == Precision::kFp32) {
    const char* peak_key = c.training.tf32 ? "peak_tf32_flops" : "peak_fp32_flops";
    std::printf("for lattice plan --gpu FILE  : \"%s\": %.4g, \"memory_bandwidth\": %.4g%s; --gemm-efficiency %.3f\n",
                peak_key, peak * 1e9, bandwidth, device == Device::kCpu ? ", \"overlap_communication\": false" : "",
                efficiency);
  }
  std::printf("precision                    : %s (weights + gradients + master weights + moments: %.0f B/param)\n",
              precision_name(c.training.precision), rank_memory(stats, 1, 1, 1, false).bytes_per_param);
  std::printf("peak host memory (RSS)       : %.3f GiB\n", r.peak_host_bytes / double(1 << 30));
  if (r.peak_device_bytes >= 0)
    std::printf("peak %s memory             : %.3f GiB\n", device_name(device), r.peak_device_bytes / double(1 << 30));
  if (r.device_outside_pool_bytes >= 0)
    std::printf("%s memory beyond the pool  : %.3f GiB (the CUDA context, libraries, NCCL; not in the plan)\n",
                device_name(device), r.device_outside_pool_bytes / double(1 << 30));
  if (c.training.precision == Precision::kBf16) {
    // The bf16 GEMM path against the f32 one, same shape, same run (bf16 in and out, f32 accumulate).
    const int64_t n = device == Device::kCpu ? 1536 : 8192;
    const double f32 = measure_matmul_gflops(device, DType::kF32, n), bf16 = measure_matmul_gflops(device, DType::kBF16, n);
    std::printf("bf16 matmul GFLOP/s (%lld^3)  : %.1f vs f32 %.1f (%.2fx)\n", (long long)n, bf16, f32, bf16 / f32);
  }
  if (profile_ops) {
    // Two events per op add host work: where the host limits the step, the step is slower than unprofiled.
    std::printf("\n%s", format_op_profile(r.op_profile, r.profiled_steps, r.median_step_s, 40).c_str());
  }
  return 0;
}

}  // namespace lattice
