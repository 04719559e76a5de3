// ops::matmul_group's choice between a backend's batched GEMM (kernels/backend.h: gemm_batched) and
// one matmul (matmul_bias) per product, on the CUDA stand-in with a recording gemm_batched: operands
// at one stride each reach it once with those strides (0 for a shared operand), and anything else —
// outputs at no single stride, mixed dtypes, a declined call — runs product by product; either way
// the results are the CPU's, bit for bit. Then the op's argument errors.
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

struct BatchedCall {
  int64_t m, n, k, stride_a, stride_b, stride_bias, stride_c, batch;
  bool has_bias;
  float alpha, beta;
};
std::vector<BatchedCall> g_calls;
bool g_decline = false;

// Records the call; runs f32 problems as the CPU does (sgemm per product, then the bias add, each
// rounding to f32 as the CPU's two ops do) and declines bf16 ones and every call while g_decline.
bool recording_gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                            int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, bool ab_bf16,
                            const void* bias, int64_t stride_bias, float beta, void* c, bool c_bf16, int64_t ldc,
                            int64_t stride_c, int64_t batch) {
  g_calls.push_back({m, n, k, stride_a, stride_b, stride_bias, stride_c, batch, bias != nullptr, alpha, beta});
  if (g_decline || ab_bf16 || c_bf16) return false;
  const Backend& cpu = cpu::backend();
  for (int64_t i = 0; i < batch; ++i) {
    float* ci = static_cast<float*>(c) + i * stride_c;
    cpu.sgemm(trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a) + i * stride_a, lda,
              static_cast<const float*>(b) + i * stride_b, ldb, beta, ci, ldc);
    if (bias != nullptr) cpu.add_bias(ci, static_cast<const float*>(bias) + i * stride_bias, m, n);
  }
  return true;
}

Backend recording_stand_in() {
  Backend b = test::cuda_stand_in();
  b.gemm_batched = &recording_gemm_batched;
  return b;
}

// The three slices of `buffer` at `step` elements apart, from `first`, each of `shape`.
std::vector<Tensor> slices(const Tensor& buffer, int64_t step, int64_t first, const Shape& shape, int count = 3) {
  std::vector<Tensor> out;
  for (int i = 0; i < count; ++i) out.push_back(buffer.slice_flat(i * step + first, shape));
  return out;
}

constexpr int64_t kRows = 6, kOut = 8, kIn = 7, kBlock = kOut * kIn + kOut;  // a weight and its bias

}  // namespace

TEST_CASE("matmul_group through a batched entry matches the CPU bit for bit in every harness case") {
  g_calls.clear();
  test::check_stand_in_matches_cpu(recording_stand_in());
  CHECK(!g_calls.empty());
}

TEST_CASE("q, k, v laid out as the model lays them out reach gemm_batched once, with their strides") {
  const Backend stand_in = recording_stand_in();
  test::ScopedBackend registered(Device::kCuda, &stand_in);
  const DeviceContext device(Device::kCuda);
  test::Inputs in(9);
  const Tensor x_host = in.uniform({kRows, kIn}), params_host = in.uniform({3 * kBlock});
  const Tensor dy_host = in.uniform({3, kRows, kOut}), grads_host = in.uniform({3 * kBlock});
  const Tensor x = device.to_device(x_host), params = device.to_device(params_host);
  const Tensor dy = device.to_device(dy_host), grads = device.to_device(grads_host);
  const Tensor out = device.empty({3, kRows, kOut});
  // The forward as the model runs it, into `out`; and the CPU's products one by one.
  const auto forward = [&] {
    std::vector<Tensor> ys = slices(out, kRows * kOut, 0, {kRows, kOut});
    ops::matmul_group({&x, 1}, false, slices(params, kBlock, 0, {kOut, kIn}), true,
                      slices(params, kBlock, kOut * kIn, {kOut}), ys);
  };
  const auto forward_on_cpu = [&] {
    Tensor want = Tensor::empty({3, kRows, kOut});
    for (int i = 0; i < 3; ++i) {
      Tensor yi = want.slice_flat(i * kRows * kOut, {kRows, kOut});
      ops::matmul_bias(x_host, false, params_host.slice_flat(i * kBlock, {kOut, kIn}), true,
                       params_host.slice_flat(i * kBlock + kOut * kIn, {kOut}), yi);
    }
    return want;
  };

  SECTION("forward: x shared, weights and biases one parameter block apart, outputs side by side") {
    g_calls.clear();
    forward();
    REQUIRE(g_calls.size() == 1);
    const BatchedCall& call = g_calls[0];
    CHECK((call.m == kRows && call.n == kOut && call.k == kIn && call.batch == 3 && call.has_bias));
    CHECK((call.stride_a == 0 && call.stride_b == kBlock && call.stride_bias == kBlock && call.stride_c == kRows * kOut));
    CHECK(test::same_bits(device.to_host(out), forward_on_cpu()));
  }
  SECTION("weight gradients: output gradients side by side, x shared, accumulated one block apart") {
    g_calls.clear();
    std::vector<Tensor> dw = slices(grads, kBlock, 0, {kOut, kIn});
    ops::matmul_group(slices(dy, kRows * kOut, 0, {kRows, kOut}), true, {&x, 1}, false, {}, dw, 1.0f, 1.0f);
    REQUIRE(g_calls.size() == 1);
    const BatchedCall& call = g_calls[0];
    CHECK((call.m == kOut && call.n == kIn && call.k == kRows && call.batch == 3 && !call.has_bias));
    CHECK((call.stride_a == kRows * kOut && call.stride_b == 0 && call.stride_c == kBlock));
    CHECK((call.alpha == 1.0f && call.beta == 1.0f));
    Tensor want = test::with_bf16({grads_host}, {})[0];  // a host copy
    for (int i = 0; i < 3; ++i) {
      Tensor dwi = want.slice_flat(i * kBlock, {kOut, kIn});
      ops::matmul(dy_host.slice_flat(i * kRows * kOut, {kRows, kOut}), true, x_host, false, dwi, 1.0f, 1.0f);
    }
    CHECK(test::same_bits(device.to_host(grads), want));  // the biases between the weights untouched too
  }
  SECTION("outputs at no single stride, or weights of two dtypes: one product at a time") {
    g_calls.clear();
    std::vector<Tensor> ys = {out.slice_flat(0, {kRows, kOut}), out.slice_flat(kRows * kOut, {kRows, kOut}),
                              device.empty({kRows, kOut})};  // a separate allocation: not one stride on
    const std::vector<Tensor> weights = slices(params, kBlock, 0, {kOut, kIn});
    ops::matmul_group({&x, 1}, false, weights, true, {}, ys);
    Tensor bf16_weight = device.empty({kOut, kIn}, DType::kBF16);
    ops::cast(weights[1], bf16_weight);
    const std::vector<Tensor> mixed = {weights[0], bf16_weight};
    ops::matmul_group({&x, 1}, false, mixed, true, {}, {ys.data(), 2});
    CHECK(g_calls.empty());
  }
  SECTION("a declined call runs product by product, with the same results") {
    g_decline = true;
    g_calls.clear();
    forward();
    g_decline = false;
    CHECK(g_calls.size() == 1);
    CHECK(test::same_bits(device.to_host(out), forward_on_cpu()));
  }
}

TEST_CASE("matmul_group's argument errors name the op and the product") {
  test::Inputs in(4);
  const Tensor x = in.uniform({kRows, kIn}), w = in.uniform({3, kOut, kIn}), bias = in.uniform({3, kOut});
  Tensor out = in.uniform({3, kRows, kOut});
  const std::vector<Tensor> weights = slices(w, kOut * kIn, 0, {kOut, kIn});
  std::vector<Tensor> ys = slices(out, kRows * kOut, 0, {kRows, kOut});
  SECTION("no outputs") {
    CHECK_THROWS_WITH(ops::matmul_group({&x, 1}, false, weights, true, {}, {}), Catch::Contains("matmul_group: no products"));
  }
  SECTION("two weights for three outputs") {
    CHECK_THROWS_WITH(ops::matmul_group({&x, 1}, false, {weights.data(), 2}, true, {}, ys),
                      Catch::Contains("3 products take 1 or 3 tensors of a and of b"));
  }
  SECTION("a product of another shape") {
    std::vector<Tensor> mixed = {ys[0], ys[1], out.slice_flat(2 * kRows * kOut, {kRows - 1, kOut})};
    CHECK_THROWS_WITH(ops::matmul_group({&x, 1}, false, weights, true, {}, mixed),
                      Catch::Contains("matmul_group: c is"));
  }
  SECTION("biases with alpha != 1") {
    const std::vector<Tensor> biases = slices(bias, kOut, 0, {kOut});
    CHECK_THROWS_WITH(ops::matmul_group({&x, 1}, false, weights, true, biases, ys, 0.5f),
                      Catch::Contains("with biases alpha must be 1 and beta 0"));
  }
  SECTION("an output that overlaps another product's input") {
    std::vector<Tensor> aliasing = {ys[0], ys[1], w.slice_flat(0, {kRows, kOut})};
    CHECK_THROWS_WITH(ops::matmul_group({&x, 1}, false, weights, true, {}, aliasing),
                      Catch::Contains("output c[2]"));
  }
}
