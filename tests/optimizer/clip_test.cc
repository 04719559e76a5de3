// global_grad_norm over a hand-made store: grads 3 and 4 -> norm 5 (uses ops::sum_squares).
#include <catch2/catch.hpp>

#include "model/parameter_store.h"
#include "trainer/optimizer.h"

using namespace lattice;

TEST_CASE("global_grad_norm and clipping of a 3-4-5 store") {
  ParameterStore store({{.name = "a", .shape = {1}}, {.name = "b.bias", .shape = {1}}}, host_context());
  store.grad(0).f32()[0] = 3.0f;
  store.grad(1).f32()[0] = 4.0f;
  const double norm = global_grad_norm(store);  // sqrt(9 + 16) = 5
  CHECK(norm == Approx(5.0).margin(1e-12));
  CHECK(clip_scale(norm, 1.0) == Approx(0.2).margin(1e-6));  // 1 / (5 + 1e-6)
  CHECK(clip_scale(norm, 0.0) == 1.0f);

  ParameterStore empty_store(std::vector<ParamSpec>{}, host_context());
  CHECK(global_grad_norm(empty_store) == 0.0);
}
