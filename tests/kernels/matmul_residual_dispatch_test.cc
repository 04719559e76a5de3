// ops::matmul_residual's choice between a backend's fused entry (kernels/backend.h: gemm_residual) and
// matmul_bias (matmul) then add, on the CUDA stand-in with a recording gemm_residual: the residual
// reaches it as C and c as D, with the bias or none; a residual of another dtype than c, or a declined
// call, runs the separate ops; either way the results are the CPU's, bit for bit. Then the op's
// argument errors.
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

struct ResidualCall {
  int64_t m, n, k, ldc;
  bool ab_bf16, c_bf16;
  const void *bias, *residual, *c;
};
std::vector<ResidualCall> g_calls;
bool g_decline = false;

// Records the call; runs f32 problems as the CPU's ops do (sgemm, the bias add, the residual add,
// each rounding to f32) and declines bf16 ones and every call while g_decline.
bool recording_gemm_residual(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                             const void* b, int64_t ldb, bool ab_bf16, const void* bias, const void* residual, void* c,
                             bool c_bf16, int64_t ldc) {
  g_calls.push_back({m, n, k, ldc, ab_bf16, c_bf16, bias, residual, c});
  if (g_decline || ab_bf16 || c_bf16) return false;
  const Backend& cpu = cpu::backend();
  auto* out = static_cast<float*>(c);
  cpu.sgemm(trans_a, trans_b, m, n, k, 1.0f, static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb,
            0.0f, out, ldc);
  if (bias != nullptr) cpu.add_bias(out, static_cast<const float*>(bias), m, n);
  cpu.add(out, static_cast<const float*>(residual), out, m * n);
  return true;
}

Backend recording_stand_in() {
  Backend b = test::cuda_stand_in();
  b.gemm_residual = &recording_gemm_residual;
  return b;
}

constexpr int64_t kRows = 6, kOut = 8, kIn = 7;

}  // namespace

TEST_CASE("matmul_residual through a fused entry matches the CPU bit for bit in every harness case") {
  g_calls.clear();
  test::check_stand_in_matches_cpu(recording_stand_in());
  CHECK(!g_calls.empty());
}

TEST_CASE("the residual reaches gemm_residual as C and c as D, with the bias or none") {
  const Backend stand_in = recording_stand_in();
  test::ScopedBackend registered(Device::kCuda, &stand_in);
  const DeviceContext device(Device::kCuda);
  test::Inputs in(11);
  const Tensor x_host = in.uniform({kRows, kIn}), w_host = in.uniform({kOut, kIn}), bias_host = in.uniform({kOut});
  const Tensor residual_host = in.uniform({kRows, kOut});
  const Tensor x = device.to_device(x_host), w = device.to_device(w_host), bias = device.to_device(bias_host);
  const Tensor residual = device.to_device(residual_host);
  Tensor c = device.empty({kRows, kOut});
  // The ops the fused entry replaces, on the CPU.
  const auto on_cpu = [&](bool with_bias) {
    Tensor want = Tensor::empty({kRows, kOut});
    if (with_bias) {
      ops::matmul_bias(x_host, false, w_host, true, bias_host, want);
    } else {
      ops::matmul(x_host, false, w_host, true, want);
    }
    ops::add(want, residual_host, want);
    return want;
  };

  for (bool with_bias : {true, false}) {
    INFO("with bias: " << with_bias);
    g_calls.clear();
    ops::matmul_residual(x, false, w, true, with_bias ? bias : Tensor{}, residual, c);
    REQUIRE(g_calls.size() == 1);
    const ResidualCall& call = g_calls[0];
    CHECK((call.m == kRows && call.n == kOut && call.k == kIn && call.ldc == kOut && !call.ab_bf16 && !call.c_bf16));
    CHECK(call.residual == residual.raw());
    CHECK(call.c == c.raw());
    CHECK(call.bias == (with_bias ? bias.raw() : nullptr));
    CHECK(test::same_bits(device.to_host(c), on_cpu(with_bias)));
  }

  SECTION("bf16 operands reach it as bf16; a residual of another dtype than c does not") {
    Tensor x16 = device.empty({kRows, kIn}, DType::kBF16), w16 = device.empty({kOut, kIn}, DType::kBF16);
    ops::cast(x, x16);
    ops::cast(w, w16);
    Tensor c16 = device.empty({kRows, kOut}, DType::kBF16), residual16 = device.empty({kRows, kOut}, DType::kBF16);
    ops::cast(residual, residual16);
    g_calls.clear();
    ops::matmul_residual(x16, false, w16, true, Tensor{}, residual16, c16);  // declined by the recorder
    REQUIRE(g_calls.size() == 1);
    CHECK((g_calls[0].ab_bf16 && g_calls[0].c_bf16));
    g_calls.clear();
    ops::matmul_residual(x16, false, w16, true, Tensor{}, residual, c16);  // f32 residual, bf16 c
    CHECK(g_calls.empty());
  }
  SECTION("a declined call runs matmul_bias and add, with the same results") {
    g_decline = true;
    g_calls.clear();
    ops::matmul_residual(x, false, w, true, bias, residual, c);
    g_decline = false;
    CHECK(g_calls.size() == 1);
    CHECK(test::same_bits(device.to_host(c), on_cpu(true)));
  }
}

TEST_CASE("matmul_residual's argument errors name the op and the operand") {
  const DeviceContext device(Device::kCpu);
  test::Inputs in(12);
  const Tensor x = in.uniform({kRows, kIn}), w = in.uniform({kOut, kIn});
  Tensor c = device.empty({kRows, kOut});
  CHECK_THROWS_WITH(ops::matmul_residual(x, false, w, true, Tensor{}, c, c),
                    Catch::Contains("matmul_residual") && Catch::Contains("overlaps residual"));
  CHECK_THROWS_WITH(ops::matmul_residual(x, false, w, true, Tensor{}, in.uniform({kRows, kOut + 1}), c),
                    Catch::Contains("matmul_residual") && Catch::Contains("residual"));
  CHECK_THROWS_WITH(ops::matmul_residual(x, false, w, true, in.uniform({kOut + 1}), in.uniform({kRows, kOut}), c),
                    Catch::Contains("matmul_residual") && Catch::Contains("bias"));
}
