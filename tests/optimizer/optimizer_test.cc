// The Optimizer over a whole ParameterStore (AdamW on its fp32 main parameters, decay only on
// matrices, the values written back to the store), over bf16 parameters (fp32 master weights from
// the exact initial values, the values their rounding), and the global-norm clipping helpers.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/bf16.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "model/parameter_store.h"
#include "parallel/param_grad_buffer.h"
#include "trainer/optimizer.h"

using namespace lattice;

namespace {

std::vector<ParamSpec> specs() {
  // Flat layout: w [0,4) decay | b [4,6) no | norm [6,8) no | w2 [8,10) decay.
  return {
      {.name = "w", .shape = {2, 2}, .weight_decay = true},
      {.name = "b", .shape = {2}, .init = InitKind::kZeros, .weight_decay = false},
      {.name = "norm.weight", .shape = {2}, .init = InitKind::kOnes, .weight_decay = false},
      {.name = "w2", .shape = {1, 2}, .weight_decay = true},
  };
}

OptimizerOptions opt_config() {
  OptimizerConfig c;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weight_decay = 0.5;
  return optimizer_options(c);
}

}  // namespace

TEST_CASE("Optimizer decays matrices only") {
  ParameterStore store(specs(), host_context());
  float* values = store.flat_values().f32();
  for (int i = 0; i < 10; ++i) values[i] = 2.0f;
  // Zero grads: m = v = 0 so the Adam term is 0 / (0 + eps) = 0 and only decay moves anything.
  Optimizer opt(store, opt_config());
  REQUIRE(opt.step_count() == 0);
  REQUIRE(opt.exp_avg().numel() == 10);
  REQUIRE(opt.exp_avg_sq().numel() == 10);
  opt.step(0.01, 1.0f);
  REQUIRE(opt.step_count() == 1);
  // Decay factor 1 - lr * wd = 1 - 0.01 * 0.5 = 0.995: 2 * 0.995 = 1.99.
  for (int i : {0, 1, 2, 3, 8, 9}) CHECK(values[i] == Approx(1.99).margin(1e-6));
  for (int i : {4, 5, 6, 7}) CHECK(values[i] == 2.0f);
  // Unsharded fp32 parameters are the main parameters themselves: no second fp32 copy of the model.
  CHECK(opt.main_params().raw() == store.flat_values().raw());
  CHECK(opt.main_params().numel() == store.flat_values().numel());
}

TEST_CASE("Optimizer step: Adam term everywhere, decay on matrices, moments in flat layout") {
  ParameterStore store(specs(), host_context());
  float* values = store.flat_values().f32();
  float* grads = store.flat_grads().f32();
  for (int i = 0; i < 10; ++i) {
    values[i] = 2.0f;
    grads[i] = (i % 2 == 0) ? 0.5f : -0.5f;
  }
  Optimizer opt(store, opt_config());
  opt.step(0.01, 2.0f);  // grad_scale 2: scaled g = +-1
  // Step 1: Adam term = lr * sign(g) = 0.01. Decay params: 2 * 0.995 - 0.01 sign(g) = 1.98 or 2.0;
  // no-decay params: 2 - 0.01 sign(g) = 1.99 or 2.01.
  for (int i = 0; i < 10; ++i) {
    const bool decay = i < 4 || i >= 8;
    const float sign = (i % 2 == 0) ? 1.0f : -1.0f;
    const double want = (decay ? 1.99 : 2.0) - 0.01 * sign;
    CHECK(values[i] == Approx(want).margin(1e-6));
    CHECK(opt.exp_avg().f32()[i] == Approx(0.1 * sign).margin(1e-7));   // 0.1 * g
    CHECK(opt.exp_avg_sq().f32()[i] == Approx(0.001).epsilon(1e-4));     // 0.001 * g^2
  }
  // Step 2 with the same grads: m = 0.19 g, m_hat = g; v = 0.001999, v_hat = 1; Adam term 0.01 sign(g) again.
  opt.step(0.01, 2.0f);
  REQUIRE(opt.step_count() == 2);
  CHECK(values[0] == Approx(1.98 * 0.995 - 0.01).margin(1e-6));  // 1.9601
  CHECK(values[4] == Approx(1.99 - 0.01).margin(1e-6));          // 1.98 (bias, no decay)
  CHECK(values[7] == Approx(2.01 + 0.01).margin(1e-6));          // 2.02 (norm gain, no decay)
}

TEST_CASE("Optimizer step count can be restored") {
  ParameterStore store(specs(), host_context());
  Optimizer opt(store, opt_config());
  opt.set_step_count(41);
  REQUIRE(opt.step_count() == 41);
  opt.step(0.0, 1.0f);
  REQUIRE(opt.step_count() == 42);
  REQUIRE_THROWS_AS(opt.set_step_count(-1), Error);
}

namespace {

float round_bf16(float x) { return bfloat16_to_float(float_to_bfloat16(x)); }

// Exact fp32 values that bf16 cannot hold: 1.3 + 0.0123 i with alternating signs.
Tensor off_grid_values(int64_t n) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = (i % 2 ? -1.0f : 1.0f) * (1.3f + 0.0123f * static_cast<float>(i));
  return t;
}

// The trainer's start-up (trainer/model_builder.cc's initial_values): each parameter's exact fp32
// initial values, one parameter at a time, from `flat` (the buffer's flat layout).
void set_initial_values(Optimizer& opt, const ParamGradBuffer& buffer, const Tensor& flat) {
  for (size_t p = 0; p < buffer.count(); ++p)
    opt.set_initial_value(p, flat.slice_flat(buffer.offset(p), buffer.spec(p).shape));
}

void check_values_round_main(const ParamGradBuffer& buffer, Optimizer& opt) {
  for (int64_t i = 0; i < buffer.numel(); ++i) {
    INFO("element " << i);
    CHECK(buffer.flat_values().bf16()[i] == float_to_bfloat16(opt.main_params().f32()[i]));
  }
}

}  // namespace

// The fp32 master weights of bf16 parameters start at the exact initial values (not at their
// rounding) and step exactly as fp32 AdamW on fp32 parameters does (the reference: ops::adamw_update
// per parameter on a copy of the initial values); the bf16 values are their rounding throughout.
TEST_CASE("bf16 parameters: fp32 main parameters from the exact initial values, the values their rounding") {
  ParamGradBuffer buffer(specs(), DType::kBF16, host_context());
  const Tensor initial = off_grid_values(buffer.numel());
  for (int64_t i = 0; i < initial.numel(); ++i) REQUIRE(initial.f32()[i] != round_bf16(initial.f32()[i]));
  Optimizer opt(buffer, opt_config());
  set_initial_values(opt, buffer, initial);
  REQUIRE(opt.main_params().dtype() == DType::kF32);
  CHECK(std::memcmp(opt.main_params().raw(), initial.raw(), initial.bytes()) == 0);
  check_values_round_main(buffer, opt);

  const Shape flat{buffer.numel()};
  Tensor ref = Tensor::empty(flat), m = Tensor::zeros(flat), v = Tensor::zeros(flat);
  ops::copy(initial, ref);
  for (int64_t i = 0; i < buffer.numel(); ++i) buffer.flat_grads().f32()[i] = 0.1f * static_cast<float>(i) - 0.4f;
  for (int64_t step = 1; step <= 2; ++step) {
    opt.step(0.01, 2.0f);
    for (size_t p = 0; p < buffer.count(); ++p) {
      const Shape shape{buffer.spec(p).numel()};
      Tensor rp = ref.slice_flat(buffer.offset(p), shape), rm = m.slice_flat(buffer.offset(p), shape);
      Tensor rv = v.slice_flat(buffer.offset(p), shape);
      ops::adamw_update(rp, buffer.flat_grads().slice_flat(buffer.offset(p), shape), rm, rv,
                        {0.01f, 0.9f, 0.999f, 1e-8f, buffer.spec(p).weight_decay ? 0.5f : 0.0f, step, 2.0f});
    }
    CHECK(std::memcmp(opt.main_params().raw(), ref.raw(), ref.bytes()) == 0);
    check_values_round_main(buffer, opt);
  }
}

// Without set_initial_value the master weights start from the (bf16) values, widened exactly; fp32
// parameters take the initial values themselves (they are their own main parameters); a malformed
// initial value is an error.
TEST_CASE("initial values: default from the values, written into fp32 parameters, checked") {
  ParamGradBuffer bf16(specs(), DType::kBF16, host_context());
  ops::cast(off_grid_values(bf16.numel()), bf16.flat_values());
  Optimizer from_values(bf16, opt_config());
  for (int64_t i = 0; i < bf16.numel(); ++i)
    CHECK(from_values.main_params().f32()[i] == bfloat16_to_float(bf16.flat_values().bf16()[i]));

  ParameterStore store(specs(), host_context());
  const Tensor initial = off_grid_values(store.numel());
  Optimizer fp32(store, opt_config());
  set_initial_values(fp32, store, initial);
  CHECK(fp32.main_params().raw() == store.flat_values().raw());
  CHECK(std::memcmp(store.flat_values().raw(), initial.raw(), initial.bytes()) == 0);

  CHECK_THROWS_WITH(from_values.set_initial_value(0, Tensor::zeros({3})), Catch::Contains("set_initial_value"));
  CHECK_THROWS_WITH(from_values.set_initial_value(0, Tensor::zeros(bf16.spec(0).shape, DType::kBF16)),
                    Catch::Contains("set_initial_value"));
}

// A checkpoint load (checkpoints hold fp32 main parameters) fills the main parameters, and
// params_from_main sets the bf16 values to their rounding.
TEST_CASE("bf16 parameters: params_from_main rounds the loaded main parameters into the values") {
  ParamGradBuffer buffer(specs(), DType::kBF16, host_context());
  Optimizer opt(buffer, opt_config());
  const Tensor loaded = off_grid_values(buffer.numel());
  CHECK(opt.state_ranges().size() == 1);  // unsharded: the whole flat layout
  CHECK(opt.state_ranges()[0].numel == buffer.numel());
  ops::copy(loaded, opt.main_params());
  opt.params_from_main();
  check_values_round_main(buffer, opt);
}

// Master weights: AdamW steps of 1e-3 on parameters at 1.5, where bf16's spacing is 2^-7 (a step is
// a quarter of the half-spacing). Ten steps move the fp32 main parameters to 1.49 and the values to
// its rounding, 1.4921875; without main parameters every step restarts from the rounded 1.5 and
// rounds back to it: the values never move.
TEST_CASE("bf16 parameters: updates below bf16 resolution accumulate in the main parameters") {
  for (bool disable : {false, true}) {
    CAPTURE(disable);
    OptimizerOptions config = opt_config();
    config.weight_decay = 0.0;
    config.test_disable_main_params = disable;
    ParamGradBuffer buffer(specs(), DType::kBF16, host_context());
    Tensor initial = Tensor::empty({buffer.numel()});
    ops::fill(initial, 1.5f);
    Optimizer opt(buffer, config);
    set_initial_values(opt, buffer, initial);
    ops::fill(buffer.flat_grads(), 1.0f);  // constant gradient: each Adam step is lr
    for (int step = 0; step < 10; ++step) opt.step(1e-3, 1.0f);
    for (int64_t i = 0; i < buffer.numel(); ++i) {
      CHECK(opt.main_params().f32()[i] == Approx(disable ? 1.5 - 1e-3 : 1.5 - 1e-2).margin(1e-5));
      CHECK(buffer.flat_values().bf16()[i] == (disable ? 0x3fc0 : 0x3fbf));  // 1.5; 1.4921875
    }
  }
}

TEST_CASE("clip_scale") {
  CHECK(clip_scale(5.0, 1.0) == Approx(0.2).margin(1e-6));  // 1 / (5 + 1e-6)
  CHECK(clip_scale(5.0, 10.0) == 1.0f);                      // under the limit: no clipping
  CHECK(clip_scale(5.0, 0.0) == 1.0f);                       // 0 = off
  CHECK(clip_scale(0.0, 1.0) == 1.0f);
  CHECK(clip_scale(2.0, 1.0) == Approx(0.5).margin(1e-6));
}
