// ops::linear_weight_grad's choice between a backend's fused entry (kernels/backend.h: gemm_bias_grad)
// and matmul then bias_backward, on the CUDA stand-in with a recording gemm_bias_grad: dy reaches it
// as a [K, M] and x as b [K, N], the f32 gradients as c and bias_grad; bf16 dy and x reach it as
// bf16, a bf16 weight gradient or a mixed pair does not; a declined call runs the separate ops;
// either way the results are the CPU's, bit for bit. Then the op's argument errors.
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/test_util.h"

using namespace lattice;

namespace {

struct BiasGradCall {
  int64_t m, n, k, lda, ldb;
  bool ab_bf16;
  const void *a, *b, *c, *bias_grad;
};
std::vector<BiasGradCall> g_calls;
bool g_decline = false;

// Records the call; runs f32 problems as the CPU's ops do (sgemm with beta 1, then the bias
// gradient's column sums) and declines bf16 ones and every call while g_decline.
bool recording_gemm_bias_grad(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                              bool ab_bf16, float* c, float* bias_grad) {
  g_calls.push_back({m, n, k, lda, ldb, ab_bf16, a, b, c, bias_grad});
  if (g_decline || ab_bf16) return false;
  const Backend& cpu = cpu::backend();
  const auto* dy = static_cast<const float*>(a);
  cpu.sgemm(true, false, m, n, k, 1.0f, dy, lda, static_cast<const float*>(b), ldb, 1.0f, c, n);
  cpu.bias_backward(dy, bias_grad, k, m);
  return true;
}

Backend recording_stand_in() {
  Backend b = test::cuda_stand_in();
  b.gemm_bias_grad = &recording_gemm_bias_grad;
  return b;
}

constexpr int64_t kRows = 6, kOut = 8, kIn = 7;

}  // namespace

TEST_CASE("linear_weight_grad through a fused entry matches the CPU bit for bit in every harness case") {
  g_calls.clear();
  test::check_stand_in_matches_cpu(recording_stand_in());
  CHECK(!g_calls.empty());
}

TEST_CASE("dy and x reach gemm_bias_grad as a [K, M] and b [K, N], the gradients as c and bias_grad") {
  const Backend stand_in = recording_stand_in();
  test::ScopedBackend registered(Device::kCuda, &stand_in);
  const DeviceContext device(Device::kCuda);
  test::Inputs in(13);
  const Tensor dy_host = in.uniform({kRows, kOut}), x_host = in.uniform({kRows, kIn});
  const Tensor dw_host = in.uniform({kOut, kIn}), db_host = in.uniform({kOut});
  const Tensor dy = device.to_device(dy_host), x = device.to_device(x_host);
  // The ops the fused entry replaces, on the CPU, accumulating into the same starting gradients.
  Tensor want_dw = test::clone(dw_host), want_db = test::clone(db_host);
  ops::matmul(dy_host, true, x_host, false, want_dw, 1.0f, 1.0f);
  ops::bias_backward(dy_host, want_db);

  Tensor dw = device.to_device(dw_host), db = device.to_device(db_host);
  g_calls.clear();
  ops::linear_weight_grad(dy, x, dw, db);
  REQUIRE(g_calls.size() == 1);
  const BiasGradCall& call = g_calls[0];
  CHECK((call.m == kOut && call.n == kIn && call.k == kRows && call.lda == kOut && call.ldb == kIn && !call.ab_bf16));
  CHECK((call.a == dy.raw() && call.b == x.raw() && call.c == dw.raw() && call.bias_grad == db.raw()));
  CHECK(test::same_bits(device.to_host(dw), want_dw));
  CHECK(test::same_bits(device.to_host(db), want_db));

  SECTION("a declined call runs matmul and bias_backward, with the same results") {
    Tensor dw2 = device.to_device(dw_host), db2 = device.to_device(db_host);
    g_decline = true;
    g_calls.clear();
    ops::linear_weight_grad(dy, x, dw2, db2);
    g_decline = false;
    CHECK(g_calls.size() == 1);
    CHECK(test::same_bits(device.to_host(dw2), want_dw));
    CHECK(test::same_bits(device.to_host(db2), want_db));
  }
  SECTION("bf16 dy and x reach it as bf16; a bf16 weight gradient or mixed operands do not") {
    Tensor dy16 = device.empty({kRows, kOut}, DType::kBF16), x16 = device.empty({kRows, kIn}, DType::kBF16);
    ops::cast(dy, dy16);
    ops::cast(x, x16);
    g_calls.clear();
    ops::linear_weight_grad(dy16, x16, dw, db);  // declined by the recorder: the separate ops
    REQUIRE(g_calls.size() == 1);
    CHECK(g_calls[0].ab_bf16);
    g_calls.clear();
    ops::linear_weight_grad(dy16, x, dw, db);  // bf16 dy, f32 x
    Tensor dw16 = device.empty({kOut, kIn}, DType::kBF16);
    ops::cast(dw, dw16);
    ops::linear_weight_grad(dy16, x16, dw16, db);  // a bf16 weight gradient
    CHECK(g_calls.empty());
  }
}

TEST_CASE("linear_weight_grad's argument errors name the op and the operand") {
  test::Inputs in(14);
  const Tensor dy = in.uniform({kRows, kOut}), x = in.uniform({kRows, kIn});
  Tensor dw = in.uniform({kOut, kIn}), db = in.uniform({kOut}), wide_db = in.uniform({kOut + 1});
  CHECK_THROWS_WITH(ops::linear_weight_grad(dy, x, dw, wide_db),
                    Catch::Contains("linear_weight_grad") && Catch::Contains("dbias"));
  Tensor narrow_dw = in.uniform({kOut, kIn - 1});
  CHECK_THROWS_WITH(ops::linear_weight_grad(dy, x, narrow_dw, db), Catch::Contains("linear_weight_grad"));
  Tensor flat = in.uniform({kOut * kIn + kOut});
  Tensor dw_view = flat.slice_flat(0, {kOut, kIn}), db_overlapping = flat.slice_flat(kOut * kIn - 1, {kOut});
  CHECK_THROWS_WITH(ops::linear_weight_grad(dy, x, dw_view, db_overlapping),
                    Catch::Contains("linear_weight_grad") && Catch::Contains("overlaps"));
}
