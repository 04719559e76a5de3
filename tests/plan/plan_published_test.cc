// Plan vs published: the GPT rows of Table 1 of Narayanan et al. 2021, "Efficient Large-Scale Language
// Model Training on GPU Clusters Using Megatron-LM" (A100 80GB, 312 TFLOP/s bf16/fp16 peak, 8 GPUs per
// node, sequence 2048, vocabulary 51200, full activation recomputation). For each row's own layout
// (TP, PP, DP = GPUs / (TP·PP), global batch) lattice plan's predicted per-GPU TFLOP/s must be within
// 25% of the reported one.
//
// Calibration: one number, kDefaultGemmEfficiency (0.5 of peak for the GEMMs and the memory-bound work
// around them), the same for every row and the default of `lattice plan`.
// FLOPs are counted the paper's way for this comparison: F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per
// iteration (its Eq. 3, which includes the recomputed forward), TFLOP/s per GPU = F / (step_s · GPUs).
// Table 1 does not list micro-batch sizes or virtual stages: the micro-batch sizes are those of the
// Megatron-LM README's scaling table (16, 16, 16, 8, 4, 2, 2, 1, 1, 1), and rows with PP > 1 use the
// interleaved schedule (the paper's largest runs do) with 2 virtual stages, 3 where the layers per stage
// are odd (76B: 60 layers in 4 stages of 15; 530B: 105 layers in 35 stages of 3).
// The paper's scatter/gather optimization sends 1/t of each activation between pipeline stages; lattice's
// pipeline p2p does the same with sequence parallelism, so rows with TP and PP > 1 turn it on (the TP
// collectives move the same bytes either way).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainer/config.h"
#include "trainer/gpu_spec.h"
#include "trainer/layout_plan.h"

using namespace lattice;

namespace {

struct PaperRow {
  double billions;
  int heads, hidden, layers, tp, pp, gpus, batch;
  double tflops_per_gpu;  // reported
  int micro_batch, virtual_stages;
};

const PaperRow kTable1[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1},
    {3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1},
    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 2},
    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2},
    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3},
    {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 2},
};

Config paper_config(const PaperRow& r) {
  const int dp = r.gpus / (r.tp * r.pp);
  const nlohmann::json doc = {
      {"model",
       {{"arch", "gpt2"}, {"num_layers", r.layers}, {"hidden_size", r.hidden}, {"num_attention_heads", r.heads},
        {"ffn_hidden_size", 4 * r.hidden}, {"vocab_size", 51200}, {"seq_length", 2048}, {"recompute", "full"}}},
      {"training",
       {{"precision", "bf16"}, {"micro_batch_size", r.micro_batch}, {"global_batch_size", r.batch}}},
      {"device", "cuda"},
      {"parallel",
       {{"tensor", r.tp}, {"pipeline", r.pp}, {"data", dp}, {"virtual_stages", r.virtual_stages},
        {"schedule", r.virtual_stages > 1 ? "interleaved" : "1f1b"},
        {"sequence_parallel", r.tp > 1 && r.pp > 1}}},
  };
  return parse_config(doc, fmt::format("Table 1 row {}B", r.billions));
}

double paper_flops_per_iteration(const PaperRow& r) {
  const double B = r.batch, s = 2048, l = r.layers, h = r.hidden, V = 51200;
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace

TEST_CASE("plan predicts the Megatron-LM paper's Table 1 within 25%") {
  const GpuSpec a100 = gpu_spec("a100");
  std::printf("calibration: GEMM efficiency %.2f of the A100's 312 TFLOP/s (one number for every row)\n",
              kDefaultGemmEfficiency);
  std::printf("%8s %4s %3s %3s %5s %5s %4s %3s | %9s %9s %7s | %7s %7s %7s %7s\n", "params", "TP", "PP", "DP",
              "GPUs", "batch", "mbs", "v", "paper", "plan", "error", "bubble", "TP comm", "DP exp", "step s");
  for (const PaperRow& r : kTable1) {
    INFO(fmt::format("{}B", r.billions));
    PlanOptions o;
    o.gpus = r.gpus;
    o.gpus_per_node = 8;
    const LayoutPrediction p = predict_layout(paper_config(r), a100, o);
    const double tflops = paper_flops_per_iteration(r) / (p.step_s * r.gpus) / 1e12;
    const double error = tflops / r.tflops_per_gpu - 1;
    std::printf("%7.1fB %4d %3d %3d %5d %5d %4d %3d | %9.0f %9.1f %+6.1f%% | %6.1f%% %6.1f%% %6.1f%% %7.2f\n",
                r.billions, r.tp, r.pp, p.data, r.gpus, r.batch, r.micro_batch, r.virtual_stages, r.tflops_per_gpu,
                tflops, 100 * error, 100 * p.bubble, 100 * p.tp_comm_s / p.step_s, 100 * p.dp_exposed_s / p.step_s,
                p.step_s);
    CHECK(std::abs(error) <= 0.25);
  }
}
