// Training-step throughput against the measured sgemm peak.
#include "trainer/benchmark.h"

#include <cstdio>
#include <random>

#include <spdlog/spdlog.h>

#include "kernels/blas_runtime.h"
#include "trainer/model_stats.h"
#include "trainer/train_loop.h"

namespace lattice {

int run_benchmark(Config c, int64_t steps) {
  c.training.train_iters = steps;
  c.training.eval_interval = 0;
  c.optimizer.warmup_iters = 0;
  c.optimizer.decay_iters = 0;
  spdlog::info("BLAS: {}", blas_kernel_description());
  const double peak_before = measure_sgemm_peak_gflops();

  // Synthetic tokens: throughput does not depend on their values.
  const int32_t vocab = static_cast<int32_t>(c.model.vocab_size);
  MicroBatchSource synthetic = [vocab](int64_t g, int64_t m, Tensor& ids, Tensor& targets) {
    std::mt19937 rng(static_cast<uint32_t>(g * 1009 + m));
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      ids.i32()[i] = token(rng);
      targets.i32()[i] = token(rng);
    }
  };
  TrainResult r = train_on(c, TrainOptions{}, synthetic, MicroBatchSource{});
  const double peak_after = measure_sgemm_peak_gflops();
  const double peak = std::max(peak_before, peak_after);
  const ModelStats stats = compute_model_stats(c);

  std::printf("\n== lattice bench: %lld layers, hidden %lld, heads %lld, vocab %lld, seq %lld, micro-batch %lld ==\n",
              (long long)c.model.num_layers, (long long)c.model.hidden_size, (long long)c.model.num_attention_heads,
              (long long)c.model.vocab_size, (long long)c.model.seq_length, (long long)c.training.micro_batch_size);
  std::printf("BLAS kernel                  : %s\n", blas_kernel_description().c_str());
  std::printf("parameters                   : %.2f M\n", stats.num_params / 1e6);
  std::printf("training FLOPs per token     : %.3f GFLOP (6*N_matmul + attention)\n", stats.flops_per_token / 1e9);
  std::printf("steps timed                  : %lld (after 1 warm-up step)\n", (long long)(steps - 1));
  std::printf("tokens/s                     : %.1f\n", r.mean_tokens_per_s);
  std::printf("achieved GFLOP/s (whole step): %.1f\n", r.mean_gflops);
  std::printf("sgemm peak GFLOP/s (measured): %.1f (before %.1f, after %.1f)\n", peak, peak_before, peak_after);
  std::printf("ratio achieved / peak        : %.1f%% (target >= 50%%)\n", 100.0 * r.mean_gflops / peak);
  return 0;
}

}  // namespace lattice
