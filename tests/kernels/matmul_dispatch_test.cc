// ops::matmul's choice between a backend's bf16 GEMM (kernels/backend.h: gemm_bf16) and staging bf16
// operands through sgemm (kernels/f32_staging.h), on the CUDA stand-in (the CPU kernels over host
// memory) with counting entries: bf16 a and b go to gemm_bf16 with the op's arguments; an f32 a or b,
// k = 0 and a null entry go through the staged path.
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;
using test::Tensors;

namespace {

int g_gemm_bf16_calls = 0;
int g_sgemm_calls = 0;
bool g_c_is_bf16 = false;  // as the last gemm_bf16 call got it

std::vector<float> widened(const uint16_t* x, int64_t n) {
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = bfloat16_to_float(x[i]);
  return f;
}

// What the staged path computes (a, b and c widened exactly, the CPU sgemm, a bf16 c rounded back),
// so its results equal the staged ones bit for bit exactly when ops::matmul passes the right
// arguments: shapes, transposes, leading dims, alpha, beta and c's dtype.
void counting_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                        int64_t lda, const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16,
                        int64_t ldc) {
  ++g_gemm_bf16_calls;
  g_c_is_bf16 = c_is_bf16;
  const std::vector<float> fa = widened(a, (trans_a ? k : m) * lda), fb = widened(b, (trans_b ? n : k) * ldb);
  if (!c_is_bf16) {
    cpu::backend().sgemm(trans_a, trans_b, m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta,
                         static_cast<float*>(c), ldc);
    return;
  }
  auto* cb = static_cast<uint16_t*>(c);
  std::vector<float> fc = widened(cb, m * ldc);
  cpu::backend().sgemm(trans_a, trans_b, m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta, fc.data(), ldc);
  for (int64_t i = 0; i < m * ldc; ++i) cb[i] = float_to_bfloat16(fc[i]);
}

void counting_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  ++g_sgemm_calls;
  cpu::backend().sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The stand-in with counting matmul entries; gemm_bf16 set or left null.
Backend counting_stand_in(bool with_gemm_bf16) {
  Backend b = test::cuda_stand_in();
  b.sgemm = &counting_sgemm;
  b.gemm_bf16 = with_gemm_bf16 ? &counting_gemm_bf16 : nullptr;
  return b;
}

struct Outcome {
  int gemm_bf16_calls, sgemm_calls;
  bool c_is_bf16;
  bool same_bits;  // c as the CPU's matmul (staged) leaves it
};

// matmul(a, trans_a, b, trans_b, c, 0.5, beta) on the registered stand-in and on the CPU, from the same
// host tensors.
Outcome run(const Tensors& host, bool trans_a, bool trans_b, float beta) {
  const DeviceContext device(Device::kCuda);
  Tensor a = device.to_device(host[0]), b = device.to_device(host[1]), c = device.to_device(host[2]);
  g_gemm_bf16_calls = g_sgemm_calls = 0;
  g_c_is_bf16 = false;
  ops::matmul(a, trans_a, b, trans_b, c, 0.5f, beta);
  Tensors want = test::with_bf16(host, {});  // host copies; the CPU's own table counts nothing
  ops::matmul(want[0], trans_a, want[1], trans_b, want[2], 0.5f, beta);
  const Tensor got = device.to_host(c);
  return {g_gemm_bf16_calls, g_sgemm_calls, g_c_is_bf16, std::memcmp(got.raw(), want[2].raw(), got.bytes()) == 0};
}

// a [M, K] (or [K, M]), b [K, N] (or [N, K]) and c [M, N], with the listed ones bf16. a is 3-D when
// not transposed, so its leading dims are flattened into M = 2 * 3.
Tensors draw(bool trans_a, bool trans_b, const std::vector<int>& bf16_args, int64_t k = 9) {
  test::Inputs in(5);
  const Tensors f32{in.uniform(trans_a ? Shape{k, 6} : Shape{2, 3, k}), in.uniform(trans_b ? Shape{5, k} : Shape{k, 5}),
                    in.uniform({6, 5})};
  return test::with_bf16(f32, bf16_args);
}

}  // namespace

TEST_CASE("the CPU backend has no gemm_bf16 entry, so its bf16 matmuls take the staged path") {
  REQUIRE(cpu::backend().gemm_bf16 == nullptr);
}

TEST_CASE("bf16 a and b go to gemm_bf16 with the op's arguments, c bf16 or f32, beta 0 or 1") {
  const Backend counting = counting_stand_in(true);
  test::ScopedBackend registered(Device::kCuda, &counting);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const bool c_bf16 : {true, false}) {
        for (const float beta : {0.0f, 1.0f}) {
          const Outcome o = run(draw(ta, tb, c_bf16 ? std::vector{0, 1, 2} : std::vector{0, 1}), ta, tb, beta);
          INFO(fmt::format("trans_a {} trans_b {}, c {}, beta {}", ta, tb, c_bf16 ? "bf16" : "f32", beta));
          CHECK(o.gemm_bf16_calls == 1);
          CHECK(o.sgemm_calls == 0);
          CHECK(o.c_is_bf16 == c_bf16);
          CHECK(o.same_bits);
        }
      }
    }
  }
}

TEST_CASE("an f32 a or b, or k = 0, takes the staged path even where gemm_bf16 is set") {
  const Backend counting = counting_stand_in(true);
  test::ScopedBackend registered(Device::kCuda, &counting);
  for (const std::vector<int>& bf16_args : {std::vector<int>{}, {2}, {0}, {0, 2}, {1}, {1, 2}}) {
    INFO(fmt::format("bf16 arguments [{}]", fmt::join(bf16_args, ",")));
    const Outcome o = run(draw(false, true, bf16_args), false, true, 1.0f);
    CHECK(o.gemm_bf16_calls == 0);
    CHECK(o.sgemm_calls == 1);
    CHECK(o.same_bits);
  }
  for (const float beta : {0.0f, 0.5f}) {  // an empty product: c = beta c, no GEMM at all
    INFO("k = 0, beta " << beta);
    const Outcome o = run(draw(true, false, {0, 1, 2}, 0), true, false, beta);
    CHECK(o.gemm_bf16_calls == 0);
    CHECK(o.sgemm_calls == 0);
    CHECK(o.same_bits);
  }
}

TEST_CASE("with no gemm_bf16 entry, bf16 a and b are staged through sgemm") {
  const Backend counting = counting_stand_in(false);
  test::ScopedBackend registered(Device::kCuda, &counting);
  for (const bool c_bf16 : {true, false}) {
    INFO("c " << (c_bf16 ? "bf16" : "f32"));
    const Outcome o = run(draw(true, true, c_bf16 ? std::vector{0, 1, 2} : std::vector{0, 1}), true, true, 1.0f);
    CHECK(o.gemm_bf16_calls == 0);
    CHECK(o.sgemm_calls == 1);
    CHECK(o.same_bits);
  }
}
