// Global-norm clipping: the multiplier min(1, max_norm / (norm + 1e-6)), and 1 when clipping is off.
#include <catch2/catch.hpp>

#include "trainer/optimizer.h"

using namespace lattice;

TEST_CASE("clip_scale of a norm-5 gradient") {
  CHECK(clip_scale(5.0, 1.0) == Approx(0.2).margin(1e-6));  // 1 / (5 + 1e-6)
  CHECK(clip_scale(5.0, 10.0) == 1.0f);                    // below the threshold: unchanged
  CHECK(clip_scale(5.0, 0.0) == 1.0f);                     // clipping off
}
