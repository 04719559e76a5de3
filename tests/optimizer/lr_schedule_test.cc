// learning_rate(): Megatron-style warmup and cosine / linear / constant decay, with edge cases.
#include <catch2/catch.hpp>

#include <cmath>

#include "trainer/lr_schedule.h"

using namespace lattice;

namespace {

OptimizerConfig base(DecayStyle style) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_iters = 10;
  c.decay = style;
  c.decay_iters = 0;  // = train_iters
  return c;
}

}  // namespace

TEST_CASE("lr: linear warmup from 0 to lr") {
  OptimizerConfig c = base(DecayStyle::kCosine);
  CHECK(learning_rate(c, 110, 0) == Approx(0.0));
  CHECK(learning_rate(c, 110, 1) == Approx(0.1));   // 1.0 * 1/10
  CHECK(learning_rate(c, 110, 5) == Approx(0.5));   // 1.0 * 5/10
  CHECK(learning_rate(c, 110, 10) == Approx(1.0));  // 1.0 * 10/10
}

TEST_CASE("lr: cosine decay over [warmup, train_iters]") {
  OptimizerConfig c = base(DecayStyle::kCosine);
  // Decay span 110 - 10 = 100. Step 35: progress 0.25, 0.5 * (1 + cos(pi/4)) = 0.5 * 1.70710678
  // = 0.85355339, lr = 0.1 + 0.9 * 0.85355339 = 0.86819805.
  CHECK(learning_rate(c, 110, 35) == Approx(0.86819805).margin(1e-8));
  // Midpoint, step 60: cos(pi/2) = 0, lr = 0.1 + 0.45 = 0.55 = (1.0 + 0.1) / 2.
  CHECK(learning_rate(c, 110, 60) == Approx(0.55).margin(1e-12));
  CHECK(learning_rate(c, 110, 110) == Approx(0.1).margin(1e-12));  // end = min_lr
  CHECK(learning_rate(c, 110, 500) == Approx(0.1).margin(1e-12));  // beyond: min_lr
}

TEST_CASE("lr: linear decay") {
  OptimizerConfig c = base(DecayStyle::kLinear);
  CHECK(learning_rate(c, 110, 35) == Approx(0.775).margin(1e-12));  // 0.1 + 0.9 * (1 - 0.25)
  CHECK(learning_rate(c, 110, 60) == Approx(0.55).margin(1e-12));   // 0.1 + 0.9 * 0.5
  CHECK(learning_rate(c, 110, 110) == Approx(0.1).margin(1e-12));
  CHECK(learning_rate(c, 110, 111) == Approx(0.1).margin(1e-12));
}

TEST_CASE("lr: constant keeps lr after warmup, forever") {
  OptimizerConfig c = base(DecayStyle::kConstant);
  CHECK(learning_rate(c, 110, 5) == Approx(0.5));
  CHECK(learning_rate(c, 110, 60) == Approx(1.0));
  CHECK(learning_rate(c, 110, 110) == Approx(1.0));
  CHECK(learning_rate(c, 110, 1000) == Approx(1.0));
}

TEST_CASE("lr: explicit decay_iters ends the decay before train_iters") {
  OptimizerConfig c = base(DecayStyle::kCosine);
  c.decay_iters = 60;  // span 60 - 10 = 50; step 35: progress 0.5 -> 0.55
  CHECK(learning_rate(c, 110, 35) == Approx(0.55).margin(1e-12));
  CHECK(learning_rate(c, 110, 60) == Approx(0.1).margin(1e-12));
  CHECK(learning_rate(c, 110, 100) == Approx(0.1).margin(1e-12));
}

TEST_CASE("lr: no warmup starts at lr") {
  OptimizerConfig c = base(DecayStyle::kCosine);
  c.warmup_iters = 0;
  CHECK(learning_rate(c, 100, 0) == Approx(1.0));
  // Step 1: progress 1/100, 0.5 * (1 + cos(0.01 pi)) = 0.99975328, lr = 0.1 + 0.9 * 0.99975328 = 0.99977795.
  CHECK(learning_rate(c, 100, 1) == Approx(0.99977795).margin(1e-8));
  CHECK(learning_rate(c, 100, 50) == Approx(0.55).margin(1e-12));
  CHECK(learning_rate(c, 100, 100) == Approx(0.1).margin(1e-12));
}

TEST_CASE("lr: decay end at or before warmup end never divides by zero") {
  OptimizerConfig c = base(DecayStyle::kCosine);
  c.decay_iters = 5;  // before warmup ends: warmup wins, then min_lr
  CHECK(learning_rate(c, 110, 5) == Approx(0.5));
  CHECK(learning_rate(c, 110, 10) == Approx(1.0));
  CHECK(learning_rate(c, 110, 11) == Approx(0.1));
  c.decay_iters = 10;  // equal to warmup
  CHECK(learning_rate(c, 110, 10) == Approx(1.0));
  CHECK(learning_rate(c, 110, 11) == Approx(0.1));
  c.warmup_iters = 0;
  c.decay_iters = 0;
  for (int64_t s : {0, 1, 2}) {
    const double lr = learning_rate(c, 0, s);  // train_iters 0: nothing to decay over
    CHECK(std::isfinite(lr));
    CHECK(lr == Approx(0.1));
  }
}
