// Tensor views share storage and check their bounds.
#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "kernels/tensor.h"

using namespace lattice;

TEST_CASE("tensor views share storage and check bounds") {
  Tensor t = Tensor::zeros({4, 3});
  Tensor r = t.rows(1, 3);
  REQUIRE(r.shape() == Shape{2, 3});
  r.f32()[0] = 5.0f;
  REQUIRE(t.f32()[3] == 5.0f);
  REQUIRE_THROWS_AS(t.view({5, 3}), Error);
  REQUIRE_THROWS_AS(t.rows(2, 5), Error);
  REQUIRE_THROWS_AS(t.i32(), Error);
}
