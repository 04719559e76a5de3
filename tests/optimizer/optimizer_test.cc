// The Optimizer over a whole ParameterStore (AdamW on its fp32 main parameters, decay only on
// matrices, the values written back to the store) and the global-norm clipping helpers.
#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "model/parameter_store.h"
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

TEST_CASE("clip_scale") {
  CHECK(clip_scale(5.0, 1.0) == Approx(0.2).margin(1e-6));  // 1 / (5 + 1e-6)
  CHECK(clip_scale(5.0, 10.0) == 1.0f);                      // under the limit: no clipping
  CHECK(clip_scale(5.0, 0.0) == 1.0f);                       // 0 = off
  CHECK(clip_scale(0.0, 1.0) == 1.0f);
  CHECK(clip_scale(2.0, 1.0) == Approx(0.5).margin(1e-6));
}
