// adamw_update_runs (kernels/adamw_runs.h): every run stepped as ops::adamw_update steps it alone,
// weight decay only where run.decay, elements outside the runs untouched; the optional copy holds
// the updated values' rounding at the runs' indices and nothing else; the gradients (and copy), and
// the values too (ValuesAt::kGradients), may lie apart from the moments. Then the choice of a backend's
// fused entry (Backend::adamw_update_runs) on the CUDA stand-in: it receives the non-empty runs, the
// hyper-parameters and the copy, and gives the per-run path's bits. Then the argument errors.
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/adamw_runs.h"
#include "kernels/bf16.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/test_util.h"

using namespace lattice;

namespace {

constexpr int64_t kNumel = 64;
const AdamWHyper kHyper{0.9, 0.95, 1e-8, 0.1};
constexpr double kLr = 3e-3;
constexpr int64_t kStep = 3;
constexpr float kGradScale = 0.5f;
// Runs with a gap before, between and after them, one empty, both decay flags.
const std::vector<AdamWRun> kRuns = {{2, 10, true}, {12, 0, true}, {12, 7, false}, {25, 30, true}, {55, 5, false}};

struct State {
  Tensor values, grads, m, v;
};

State random_state(uint64_t seed) {
  test::Inputs in(seed);
  return {in.uniform({kNumel}), in.uniform({kNumel}), in.uniform({kNumel}, -0.1f, 0.1f),
          in.uniform({kNumel}, 0.0f, 0.1f)};
}

State copy_of(const State& s) {
  auto dup = [](const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw(), t.raw(), t.bytes());
    return c;
  };
  return {dup(s.values), dup(s.grads), dup(s.m), dup(s.v)};
}

// The reference: ops::adamw_update on each run's slices, with its own AdamWParams.
State per_run_reference(const State& start) {
  State s = copy_of(start);
  for (const AdamWRun& r : kRuns) {
    if (r.numel == 0) continue;
    Tensor p = s.values.slice_flat(r.offset, {r.numel}), g = s.grads.slice_flat(r.offset, {r.numel});
    Tensor m = s.m.slice_flat(r.offset, {r.numel}), v = s.v.slice_flat(r.offset, {r.numel});
    ops::adamw_update(p, g, m, v,
                      {.lr = static_cast<float>(kLr), .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                       .weight_decay = r.decay ? 0.1f : 0.0f, .step = kStep, .grad_scale = kGradScale});
  }
  return s;
}

bool in_a_run(int64_t i) {
  for (const AdamWRun& r : kRuns) {
    if (i >= r.offset && i < r.offset + r.numel) return true;
  }
  return false;
}

// The copy starts as a sentinel: elements outside the runs must keep it.
void check_copy(const Tensor& copy, const Tensor& values) {
  Tensor rounded = Tensor::empty({kNumel}, copy.dtype());
  ops::cast(values, rounded);
  const size_t size = dtype_size(copy.dtype());
  const auto* got = static_cast<const unsigned char*>(copy.raw());
  const auto* want = static_cast<const unsigned char*>(rounded.raw());
  Tensor sentinel = Tensor::empty({1}, copy.dtype());
  ops::fill(sentinel, 7.0f);
  for (int64_t i = 0; i < kNumel; ++i) {
    const void* expected = in_a_run(i) ? want + i * size : sentinel.raw();
    INFO("element " << i);
    CHECK(std::memcmp(got + i * size, expected, size) == 0);
  }
}

struct RunsCall {
  std::vector<AdamWRun> runs;
  ops::AdamWParams params;
  DataOut copy;
  bool values_at_grads;
};
std::vector<RunsCall> g_calls;

// Records the call, then steps as the per-run path does (the CPU's adamw_update on each run) and
// writes the copy through the CPU's casts.
void recording_adamw_update_runs(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 const AdamWRun* runs, size_t count, const ops::AdamWParams& p, DataOut copy,
                                 bool values_at_grads) {
  g_calls.push_back({{runs, runs + count}, p, copy, values_at_grads});
  const Backend& cpu = cpu::backend();
  for (size_t i = 0; i < count; ++i) {
    ops::AdamWParams run_params = p;
    run_params.weight_decay = runs[i].decay ? p.weight_decay : 0.0f;
    const int64_t o = runs[i].offset, go = runs[i].grads_at(), po = values_at_grads ? go : o;
    cpu.adamw_update(param + po, grad + go, exp_avg + o, exp_avg_sq + o, runs[i].numel, run_params);
    if (copy.data == nullptr) continue;
    if (copy.bf16) {
      cpu.f32_to_bf16(param + o, static_cast<uint16_t*>(copy.data) + go, runs[i].numel);
    } else {
      std::memcpy(static_cast<float*>(copy.data) + go, param + o, sizeof(float) * runs[i].numel);
    }
  }
}

}  // namespace

TEST_CASE("adamw_update_runs steps each run as adamw_update alone and leaves the rest") {
  const State start = random_state(5);
  const State want = per_run_reference(start);
  for (const bool with_copy : {false, true}) {
    for (const DType copy_dtype : {DType::kBF16, DType::kF32}) {
      if (!with_copy && copy_dtype == DType::kF32) continue;
      State s = copy_of(start);
      Tensor copy;
      if (with_copy) {
        copy = Tensor::empty({kNumel}, copy_dtype);
        ops::fill(copy, 7.0f);
      }
      adamw_update_runs(s.values, s.grads, s.m, s.v, kRuns, kHyper, kLr, kStep, kGradScale, copy);
      INFO("copy " << (with_copy ? dtype_name(copy_dtype) : "none"));
      CHECK(test::same_bits(s.values, want.values));
      CHECK(test::same_bits(s.m, want.m));
      CHECK(test::same_bits(s.v, want.v));
      CHECK(test::same_bits(s.grads, start.grads));
      if (with_copy) check_copy(copy, s.values);
    }
  }
  // The reference itself moved the runs (decayed or not) and nothing else.
  for (int64_t i = 0; i < kNumel; ++i) {
    INFO("element " << i);
    CHECK((start.values.f32()[i] != want.values.f32()[i]) == in_a_run(i));
  }
}

// The distributed optimizer's in-place layout: each run's gradients, and its copy, at grad_offset of
// a longer buffer (here 2 × offset + 3), apart from its values and moments. The same step as with the
// gradients moved to the runs' offsets; the copy at the gradients' indices, the sentinel elsewhere.
TEST_CASE("adamw_update_runs: gradients and copy at grad_offset, apart from the values and moments") {
  const State start = random_state(11);
  std::vector<AdamWRun> runs = kRuns;
  for (AdamWRun& r : runs) r.grad_offset = 2 * r.offset + 3;
  const int64_t grads_n = 2 * kNumel + 3;
  const Tensor grads = test::Inputs(12).uniform({grads_n});
  State want = copy_of(start);
  for (const AdamWRun& r : runs) {
    Tensor dst = want.grads.slice_flat(r.offset, {r.numel});
    ops::copy(grads.slice_flat(r.grad_offset, {r.numel}), dst);
  }
  adamw_update_runs(want.values, want.grads, want.m, want.v, kRuns, kHyper, kLr, kStep, kGradScale);
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    Backend stand_in = test::cuda_stand_in();
    stand_in.adamw_update_runs = &recording_adamw_update_runs;
    test::ScopedBackend registered(Device::kCuda, &stand_in);
    const DeviceContext ctx(fused ? Device::kCuda : Device::kCpu);
    Tensor values = ctx.to_device(start.values), g = ctx.to_device(grads);
    Tensor m = ctx.to_device(start.m), v = ctx.to_device(start.v);
    Tensor copy = ctx.zeros({grads_n}, DType::kBF16);
    ops::fill(copy, 7.0f);
    adamw_update_runs(values, g, m, v, runs, kHyper, kLr, kStep, kGradScale, copy);
    CHECK(test::same_bits(ctx.to_host(values), want.values));
    CHECK(test::same_bits(ctx.to_host(m), want.m));
    CHECK(test::same_bits(ctx.to_host(v), want.v));
    const Tensor got = ctx.to_host(copy);
    for (int64_t i = 0; i < grads_n; ++i) {
      float expected = 7.0f;
      for (const AdamWRun& r : runs) {
        if (i >= r.grad_offset && i < r.grad_offset + r.numel) expected = want.values.f32()[r.offset + (i - r.grad_offset)];
      }
      INFO("copy element " << i);
      CHECK(got.bf16()[i] == float_to_bfloat16(expected));
    }
  }
  const std::vector<AdamWRun> past = {{0, 5, true, 2 * kNumel}};
  State s = copy_of(start);
  REQUIRE_THROWS_WITH(adamw_update_runs(s.values, grads, s.m, s.v, past, kHyper, kLr, 1, 1.0f),
                      Catch::Contains("gradients [128, 133) outside the 131 gradients"));
}

// fp32 parameters that are their own main parameters under the distributed optimizer: the values at
// the gradients' indices of the flat buffer (ValuesAt::kGradients), the moments packed at offset. The
// same step as with the values moved to the runs' offsets; the values outside the runs untouched.
TEST_CASE("adamw_update_runs: values beside the gradients (ValuesAt::kGradients), moments apart") {
  const State start = random_state(13);
  std::vector<AdamWRun> runs = kRuns;
  for (AdamWRun& r : runs) r.grad_offset = 2 * r.offset + 3;
  const int64_t flat_n = 2 * kNumel + 3;
  test::Inputs in(14);
  const Tensor grads = in.uniform({flat_n}), values = in.uniform({flat_n});
  State want = copy_of(start);
  for (const AdamWRun& r : runs) {
    Tensor g = want.grads.slice_flat(r.offset, {r.numel}), p = want.values.slice_flat(r.offset, {r.numel});
    ops::copy(grads.slice_flat(r.grad_offset, {r.numel}), g);
    ops::copy(values.slice_flat(r.grad_offset, {r.numel}), p);
  }
  adamw_update_runs(want.values, want.grads, want.m, want.v, kRuns, kHyper, kLr, kStep, kGradScale);
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    g_calls.clear();
    Backend stand_in = test::cuda_stand_in();
    stand_in.adamw_update_runs = &recording_adamw_update_runs;
    test::ScopedBackend registered(Device::kCuda, &stand_in);
    const DeviceContext ctx(fused ? Device::kCuda : Device::kCpu);
    Tensor p = ctx.to_device(values), g = ctx.to_device(grads);
    Tensor m = ctx.to_device(start.m), v = ctx.to_device(start.v);
    adamw_update_runs(p, g, m, v, runs, kHyper, kLr, kStep, kGradScale, {}, ValuesAt::kGradients);
    if (fused) {
      REQUIRE(g_calls.size() == 1);
      CHECK(g_calls[0].values_at_grads);
    }
    CHECK(test::same_bits(ctx.to_host(m), want.m));
    CHECK(test::same_bits(ctx.to_host(v), want.v));
    const Tensor got = ctx.to_host(p);
    for (int64_t i = 0; i < flat_n; ++i) {
      float expected = values.f32()[i];
      for (const AdamWRun& r : runs) {
        if (i >= r.grad_offset && i < r.grad_offset + r.numel) expected = want.values.f32()[r.offset + (i - r.grad_offset)];
      }
      INFO("value element " << i);
      CHECK(std::memcmp(&got.f32()[i], &expected, sizeof(float)) == 0);
    }
  }
  State s = copy_of(start);
  const Tensor copy = Tensor::zeros({flat_n}, DType::kBF16);
  Tensor flat_values = values;
  REQUIRE_THROWS_WITH(adamw_update_runs(flat_values, grads, s.m, s.v, runs, kHyper, kLr, 1, 1.0f, copy,
                                        ValuesAt::kGradients),
                      Catch::Contains("values beside the gradients take no copy"));
  const std::vector<AdamWRun> past = {{0, 5, true, kNumel}};
  REQUIRE_THROWS_WITH(adamw_update_runs(s.values, grads, s.m, s.v, past, kHyper, kLr, 1, 1.0f, {}, ValuesAt::kGradients),
                      Catch::Contains("values [64, 69) outside the 64 values"));
}

TEST_CASE("a backend's fused adamw_update_runs gets the non-empty runs and the copy, with the same bits") {
  Backend stand_in = test::cuda_stand_in();
  stand_in.adamw_update_runs = &recording_adamw_update_runs;
  test::ScopedBackend registered(Device::kCuda, &stand_in);
  const DeviceContext device(Device::kCuda);
  const State start = random_state(9);
  const State want = per_run_reference(start);
  for (const bool with_copy : {false, true}) {
    g_calls.clear();
    Tensor values = device.to_device(start.values), grads = device.to_device(start.grads);
    Tensor m = device.to_device(start.m), v = device.to_device(start.v);
    Tensor copy;
    if (with_copy) {
      copy = device.zeros({kNumel}, DType::kBF16);
      ops::fill(copy, 7.0f);
    }
    adamw_update_runs(values, grads, m, v, kRuns, kHyper, kLr, kStep, kGradScale, copy);
    REQUIRE(g_calls.size() == 1);
    const RunsCall& call = g_calls[0];
    REQUIRE(call.runs.size() == 4);  // the empty run is not passed
    for (size_t i = 0, j = 0; i < kRuns.size(); ++i) {
      if (kRuns[i].numel == 0) continue;
      CHECK(call.runs[j].offset == kRuns[i].offset);
      CHECK(call.runs[j].numel == kRuns[i].numel);
      CHECK(call.runs[j].decay == kRuns[i].decay);
      ++j;
    }
    CHECK(call.params.weight_decay == 0.1f);
    CHECK(call.params.step == kStep);
    CHECK(call.params.grad_scale == kGradScale);
    CHECK(call.params.lr == static_cast<float>(kLr));
    CHECK(call.copy.data == (with_copy ? copy.raw() : nullptr));
    CHECK(call.copy.bf16 == with_copy);
    CHECK_FALSE(call.values_at_grads);
    CHECK(test::same_bits(device.to_host(values), want.values));
    CHECK(test::same_bits(device.to_host(m), want.m));
    CHECK(test::same_bits(device.to_host(v), want.v));
    if (with_copy) check_copy(device.to_host(copy), want.values);
  }
}

TEST_CASE("adamw_update_runs: argument errors") {
  State s = random_state(1);
  const std::vector<AdamWRun> outside = {{60, 5, true}};
  REQUIRE_THROWS_WITH(adamw_update_runs(s.values, s.grads, s.m, s.v, outside, kHyper, kLr, 1, 1.0f),
                      Catch::Contains("run [60, 65) outside the moments of 64 elements"));
  const Tensor short_copy = Tensor::zeros({kNumel - 1}, DType::kBF16);
  REQUIRE_THROWS_WITH(adamw_update_runs(s.values, s.grads, s.m, s.v, kRuns, kHyper, kLr, 1, 1.0f, short_copy),
                      Catch::Contains("the copy bf16[63]") && Catch::Contains("must be f32 or bf16 with the 64"));
  const Tensor int_copy = Tensor::zeros({kNumel}, DType::kI32);
  REQUIRE_THROWS_WITH(adamw_update_runs(s.values, s.grads, s.m, s.v, kRuns, kHyper, kLr, 1, 1.0f, int_copy),
                      Catch::Contains("must be f32 or bf16"));
}
