// Token and position embeddings: lookups, finite-difference gradients with repeated ids,
// accumulate semantics, and index validation errors.
#include <catch2/catch.hpp>

#include <string>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {
Tensor ids_tensor(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i];
  return t;
}
}  // namespace

TEST_CASE("embedding forward gathers rows; backward accumulates by finite differences") {
  const int64_t vocab = 11, hidden = 200;  // hidden above the 128-column block of the backward
  Tensor table = random_tensor({vocab, hidden}, 1);
  // Repeated ids (3 appears three times) exercise the scatter-add.
  Tensor ids = ids_tensor({3, 0, 10, 3, 7, 3}, {2, 3});
  Tensor out = Tensor::empty({2, 3, hidden});
  ops::embedding_forward(ids, table, out);
  CHECK(out.f32()[2 * hidden + 5] == table.f32()[10 * hidden + 5]);
  CHECK(out.f32()[4 * hidden] == table.f32()[7 * hidden]);

  Tensor r = random_tensor({2, 3, hidden}, 2);
  auto loss = [&] {
    ops::embedding_forward(ids, table, out);
    return project(out, r);
  };
  Tensor dt0 = random_tensor({vocab, hidden}, 3);
  Tensor dt = clone(dt0);
  ops::embedding_backward(ids, r, dt);
  // Check the whole row of id 3 (three contributions) plus random entries.
  Tensor row3 = table.rows(3, 4), drow3 = minus(dt, dt0).rows(3, 4);
  CHECK_GRAD(grad_check(row3, drow3, loss, 1e-2, 400));
  CHECK_GRAD(grad_check(table, minus(dt, dt0), loss, 1e-2, 300));
  // Rows never looked up are untouched.
  CHECK(dt.f32()[5 * hidden + 9] == dt0.f32()[5 * hidden + 9]);
}

TEST_CASE("embedding ids outside [0, V) are errors naming the op, the value and the position") {
  Tensor table = random_tensor({5, 4}, 1);
  Tensor out = Tensor::empty({3, 4});
  for (int32_t bad : {5, -1}) {
    Tensor ids = ids_tensor({0, bad, 2}, {3});
    try {
      ops::embedding_forward(ids, table, out);
      FAIL("expected an error");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("embedding_forward") != std::string::npos);
      CHECK(msg.find(std::to_string(bad)) != std::string::npos);
      CHECK(msg.find("position 1") != std::string::npos);
    }
    Tensor dt = Tensor::zeros({5, 4});
    CHECK_THROWS_WITH(ops::embedding_backward(ids, out, dt), Catch::Contains("embedding_backward"));
  }
}

TEST_CASE("position embedding adds table rows per position; backward sums over the batch") {
  const int64_t b = 3, t = 5, h = 6, max_pos = 8;
  Tensor x0 = random_tensor({b, t, h}, 1), table = random_tensor({max_pos, h}, 2), r = random_tensor({b, t, h}, 3);
  Tensor x = Tensor::empty({b, t, h});
  auto loss = [&] {
    ops::copy(x0, x);
    ops::add_position_embedding(x, table);
    return project(x, r);
  };
  loss();
  CHECK(x.f32()[(2 * t + 4) * h + 1] == Approx(x0.f32()[(2 * t + 4) * h + 1] + table.f32()[4 * h + 1]));
  Tensor dt0 = random_tensor({max_pos, h}, 4);
  Tensor dt = clone(dt0);
  ops::position_embedding_backward(r, dt);
  CHECK_GRAD(grad_check(table, minus(dt, dt0), loss));
  // Positions >= T get no gradient.
  CHECK(dt.f32()[6 * h + 2] == dt0.f32()[6 * h + 2]);
  Tensor short_table = random_tensor({t - 1, h}, 5);
  CHECK_THROWS_AS(ops::add_position_embedding(x, short_table), Error);
}
