// lattice plan's enumeration and ranking: every layout it returns is one validate_layout accepts,
// the JSON carries the documented fields, a model too big for the GPU is reported as not fitting,
// the order is fits first then tokens/s, and a GPU count no layout can use is an InputError naming
// --gpus. Also: plan_memory's activation slots, planned on a capped micro-batch count, equal those
// of the full step.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "parallel/activation_slots.h"
#include "parallel/schedule.h"
#include "tests/input_error_testing.h"
#include "trainer/config.h"
#include "trainer/gpu_spec.h"
#include "trainer/layout_plan.h"
#include "trainer/memory_plan.h"
#include "trainer/model_stats.h"
#include "trainer/plan_command.h"

using namespace lattice;

namespace {

PlanResult plan(const Config& c, int gpus, const GpuSpec& gpu, int top = 10) {
  PlanOptions o;
  o.gpus = gpus;
  o.top = top;
  return plan_layouts(c, gpu, o);
}

}  // namespace

TEST_CASE("every planned layout passes validate_layout and ranks fits first, then tokens/s") {
  const Config c = load_config("configs/gpt2-124m.json");
  for (int gpus : {1, 8, 64}) {
    INFO(gpus);
    const PlanResult r = plan(c, gpus, gpu_spec("h100"), 0);
    REQUIRE(!r.layouts.empty());
    REQUIRE(r.candidates == static_cast<int64_t>(r.layouts.size()));
    for (size_t i = 0; i < r.layouts.size(); ++i) {
      const LayoutPrediction& l = r.layouts[i];
      const ParallelLayout v = validate_layout(apply_layout(c, l), gpus);
      CHECK(v.tensor * v.pipeline * v.data == gpus);
      CHECK(v.micro_batches == l.micro_batches);
      CHECK(l.simulated);
      CHECK(l.step_s > 0);
      CHECK(l.mfu > 0);
      CHECK(l.mfu < 1);
      if (i > 0) {
        const LayoutPrediction& prev = r.layouts[i - 1];
        if (prev.fits == l.fits && l.fits) CHECK(prev.tokens_per_s >= l.tokens_per_s);
        if (prev.fits == l.fits && !l.fits) CHECK(prev.memory_bytes <= l.memory_bytes);
        CHECK(prev.fits >= l.fits);
      }
    }
  }
}

TEST_CASE("the --set strings of a layout give back its config") {
  const Config c = load_config("configs/llama3-8b.json");
  const PlanResult r = plan(c, 64, gpu_spec("h100"), 3);
  REQUIRE(r.layouts.size() == 3);
  for (const LayoutPrediction& l : r.layouts) {
    for (const std::vector<std::string>& sets : {layout_overrides(l), layout_overrides(l, &c)}) {
      const Config back = load_config("configs/llama3-8b.json", sets);
      CHECK(config_to_json(back) == config_to_json(apply_layout(c, l)));
      validate_layout(back, 64);
    }
  }
}

TEST_CASE("plan --json has the documented fields") {
  const PlanResult r = plan(load_config("configs/gpt2-124m.json"), 8, gpu_spec("h100"), 5);
  const nlohmann::json j = plan_json(r);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 5);
  for (const auto& row : j) {
    for (const char* key : {"tensor", "pipeline", "data", "virtual_stages", "micro_batch_size", "sequence_parallel",
                            "distributed_optimizer", "recompute", "memory_bytes", "fits", "step_s", "tokens_per_s",
                            "mfu", "bubble"}) {
      INFO(key);
      CHECK(row.contains(key));
    }
    CHECK(row["set"].is_array());
  }
}

TEST_CASE("a model too big for the GPU does not fit, and the nearest to fitting come first") {
  GpuSpec small = gpu_spec("h100");
  small.memory_bytes = 1e9;  // 1 GB: Llama 70B cannot fit on 8 of them in any layout
  const PlanResult r = plan(load_config("configs/llama3-70b.json"), 8, small, 5);
  REQUIRE(!r.layouts.empty());
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    CHECK(!r.layouts[i].fits);
    CHECK(double(r.layouts[i].memory_bytes) > 1e9);
    if (i > 0) CHECK(r.layouts[i - 1].memory_bytes <= r.layouts[i].memory_bytes);
  }
  // On 80 GB H100s the 70B model fits on 64 of them.
  const PlanResult big = plan(load_config("configs/llama3-70b.json"), 64, gpu_spec("h100"), 3);
  CHECK(big.layouts.front().fits);
}

TEST_CASE("a GPU count no layout can use is an InputError naming --gpus") {
  // GPT-2 124M: 12 heads, 12 layers, global batch 512: 7 GPUs is tensor 1 × pipeline 1 × data 7, and 7
  // does not divide 512.
  const Config c = load_config("configs/gpt2-124m.json");
  testing::require_input_error([&] { plan(c, 7, gpu_spec("h100")); }, {"--gpus 7", "no layout"});
  testing::require_input_error([&] { plan(c, 0, gpu_spec("h100")); }, {"--gpus 0"});
  testing::require_input_error([&] { gpu_spec("b300"); }, {"--gpu b300", "h100"});
}

TEST_CASE("a driver's GPU model name maps to its SXM preset, and other parts to none") {
  // Names as cudaDeviceProp::name gives them.
  CHECK(gpu_preset_of_model("NVIDIA H200") == "h200");
  CHECK(gpu_preset_of_model("NVIDIA H100 80GB HBM3") == "h100");
  CHECK(gpu_preset_of_model("NVIDIA A100-SXM4-80GB") == "a100");
  CHECK(gpu_preset_of_model("NVIDIA H100 PCIe").empty());  // 756 TFLOP/s bf16, not the SXM's 989
  CHECK(gpu_preset_of_model("NVIDIA H100 NVL").empty());
  CHECK(gpu_preset_of_model("NVIDIA GeForce RTX 4090").empty());
  CHECK(gpu_preset_of_model("CPU emulator of a GPU").empty());
  CHECK(gpu_spec(gpu_preset_of_model("NVIDIA H200")).peak_bf16_flops == 989e12);
}

TEST_CASE("the activation slots plan_memory takes from (v + 2)·p micro-batches are those of the full step") {
  // plan_memory plans the slots on at most (v + 2)·p micro-batches (the schedules' in-flight
  // activations stop growing before that); the slot planner on the real count must agree.
  for (const ScheduleKind kind : {ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    for (int p : {2, 4, 8}) {
      const int v = kind == ScheduleKind::kInterleaved ? 3 : 1;
      const int cap = (v + 2) * p;
      for (int rank = 0; rank < p; ++rank) {
        INFO(schedule_kind_name(kind) << " p " << p << " rank " << rank);
        const int m = 16 * p;
        CHECK(plan_activation_slots(make_schedule(kind, p, v, m, rank), v, m).needed ==
              plan_activation_slots(make_schedule(kind, p, v, cap, rank), v, cap).needed);
        // The pool the chunks without the head share (activation_slot_pools) too.
        std::vector<int> pools(static_cast<size_t>(v), 0);
        pools.back() = v - 1;
        CHECK(plan_activation_slots(make_schedule(kind, p, v, m, rank), v, m, pools).pool_slots ==
              plan_activation_slots(make_schedule(kind, p, v, cap, rank), v, cap, pools).pool_slots);
      }
    }
  }
}

TEST_CASE("planning Llama 70B for 512 GPUs takes well under a second") {
  const Config c = load_config("configs/llama3-70b.json");
  const auto start = std::chrono::steady_clock::now();
  const PlanResult r = plan(c, 512, gpu_spec("h100"), 10);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("plan: Llama 70B on 512 H100s, %lld layouts, %lld simulated, %.3f s\n",
              static_cast<long long>(r.candidates), static_cast<long long>(r.simulated), s);
  CHECK(r.layouts.front().fits);
  CHECK(s < 5.0);  // the target is < 1 s; a loaded test machine gets slack
}

TEST_CASE("communication that cannot overlap compute (a CPU's) is all exposed") {
  Config c = load_config("configs/gpt2-124m.json");
  c.parallel.data = 2;
  c.training.micro_batch_size = 1;
  c.training.global_batch_size = 8;
  GpuSpec gpu = gpu_spec("cpu");
  PlanOptions o;
  o.gpus = 2;
  const auto predict = [&](bool overlap, bool distributed) {
    gpu.overlap_communication = overlap;
    c.parallel.distributed_optimizer = c.parallel.overlap_param_gather = distributed;
    return predict_layout(c, gpu, o);
  };
  // The gradient all-reduce: 2(n-1)/n · bytes / β + 2(n-1)·α with n = 2, whole, without overlap.
  const double bytes = 4.0 * double(compute_model_stats(c).num_params);
  const double all_reduce = bytes / gpu.intra_node_bandwidth + 2 * gpu.intra_node_latency;
  CHECK(predict(false, false).dp_exposed_s == Approx(all_reduce).epsilon(1e-3));
  CHECK(predict(true, false).dp_exposed_s < 0.1 * all_reduce);  // buckets hide behind the backward
  // The distributed optimizer: the reduce-scatter exposed, and the parameter all-gather in the optimizer's time.
  const LayoutPrediction sharded = predict(false, true), hidden = predict(true, true);
  CHECK(sharded.dp_exposed_s == Approx(all_reduce / 2).epsilon(1e-3));
  const double adamw_half = bytes / 4 / 2 * kOptimizerBytesPerParam / gpu.memory_bandwidth;
  CHECK(sharded.optimizer_s == Approx(adamw_half + all_reduce / 2).epsilon(1e-3));
  CHECK(hidden.optimizer_s < sharded.optimizer_s);
}

TEST_CASE("a --gpu FILE's overlap_communication must be a boolean") {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/spec.json";
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"overlap_communication\": 1}", f);
  std::fclose(f);
  testing::require_input_error([&] { gpu_spec(path); }, {path, "overlap_communication", "true or false"});
  f = std::fopen(path.c_str(), "w");
  std::fputs("{\"overlap_communication\": false}", f);
  std::fclose(f);
  CHECK(!gpu_spec(path).overlap_communication);
  CHECK(gpu_spec("h100").overlap_communication);
}
