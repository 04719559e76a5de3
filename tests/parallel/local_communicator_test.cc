// LocalCommunicator (a one-process group) and the exact double sums: collectives are identities or
// copies, point-to-point is an error, split gives another one-process group.
#include <catch2/catch.hpp>

#include "kernels/error.h"
#include "parallel/exact_sum.h"
#include "parallel/local_communicator.h"

using namespace lattice;

TEST_CASE("a one-process group: identities and copies, no peers") {
  LocalCommunicator g("pp");
  CHECK(g.size() == 1);
  CHECK(g.rank() == 0);
  CHECK(g.describe() == "group 'pp' (one process)");
  Tensor x = Tensor::empty({3});
  x.f32()[0] = 1.5f, x.f32()[1] = -2.0f, x.f32()[2] = 4.0f;
  CommHandle h = g.all_reduce_async(x);
  CHECK_FALSE(h.pending());
  CHECK(x.f32()[1] == -2.0f);
  Tensor y = Tensor::zeros({3});
  g.all_gather(x, y);
  CHECK(y.f32()[2] == 4.0f);
  Tensor z = Tensor::zeros({3});
  g.reduce_scatter(x, z);
  CHECK(z.f32()[0] == 1.5f);
  g.broadcast(x, 0);
  g.barrier();
  CHECK_THROWS_AS(g.send(x, 0), Error);
  CHECK_THROWS_AS(g.recv(x, 0), Error);
  CHECK_THROWS_AS(g.all_gather(x, Tensor::zeros({4})), Error);
  auto sub = g.split(0, 0, "dp", "");
  REQUIRE(sub != nullptr);
  CHECK(sub->size() == 1);
  CHECK(g.split(-1, 0, "none", "") == nullptr);
  CHECK(exact_sum(g, 0.1) == 0.1);
  CHECK(broadcast_double(g, 0.3, 0) == 0.3);
}

TEST_CASE("a one-process group reduces bf16 as the identity") {
  LocalCommunicator g("dp");
  Tensor x = Tensor::empty({2}, DType::kBF16);
  x.bf16()[0] = 0x3f81, x.bf16()[1] = 0xc000;  // 1 + 2^-7, -2
  g.all_reduce(x);
  g.all_reduce(x, ReduceOp::kMax);
  CHECK(x.bf16()[0] == 0x3f81);
  Tensor y = Tensor::zeros({2}, DType::kBF16);
  g.reduce_scatter(x, y);
  CHECK(y.bf16()[1] == 0xc000);
}
