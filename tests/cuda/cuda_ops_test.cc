// The CUDA backend against the CPU oracle on a GPU: every op of kernels/ops.h through the backend
// harness, the heavy ops at GPT-2-124M sizes and at ragged ones (matmul in f32 and in bf16),
// bit-identical initialization and run-to-run determinism. Needs a visible GPU (tools/gpu/check.sh
// runs it on a lent H200).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kernels/adamw_runs.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "kernels/stream.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/test_util.h"

namespace lattice {
namespace {

using Tensors = std::vector<Tensor>;
using test::random_tensor;

Tensor ids(int64_t n, int32_t vocab, uint32_t seed) {
  Tensor t = Tensor::empty({n}, DType::kI32);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  for (int64_t i = 0; i < n; ++i) t.i32()[i] = dist(gen);
  return t;
}

// ‖got − want‖₂ / ‖want‖₂ over a host f32 or bf16 tensor: the norm-wise error of an op whose outputs
// sum many terms in another order (per-element relative error is meaningless near zero).
double relative_error(const Tensor& got, const Tensor& want) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = test::element(got, i) - test::element(want, i);
    diff += d * d;
    ref += test::element(want, i) * test::element(want, i);
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(test::element(t, i))) return false;
  return true;
}

// Runs `op` on GPU copies of `inputs` and returns them, after the op, on the host.
Tensors run_on_gpu(const Tensors& inputs, const std::function<void(Tensors&)>& op) {
  const DeviceContext gpu(Device::kCuda);
  Tensors gpu_t;
  for (const Tensor& t : inputs) gpu_t.push_back(gpu.to_device(t));
  op(gpu_t);
  Tensors back;
  for (const Tensor& t : gpu_t) back.push_back(gpu.to_host(t));
  return back;
}

// Runs `op` on copies of `inputs` on the CPU and on the GPU and returns both sets of tensors (host).
std::pair<Tensors, Tensors> run_both(const Tensors& inputs, const std::function<void(Tensors&)>& op) {
  Tensors cpu_t;
  for (const Tensor& t : inputs) cpu_t.push_back(test::clone(t));
  op(cpu_t);
  return {cpu_t, run_on_gpu(inputs, op)};
}

// Each listed output within `tol` norm-wise of the CPU's, finite, and reported.
void require_close(const std::string& what, const Tensors& cpu, const Tensors& gpu, const std::vector<int>& outputs,
                   double tol) {
  for (const int i : outputs) {
    const double err = relative_error(gpu[i], cpu[i]);
    INFO(what << ": output " << i << " " << cpu[i].describe() << " relative error " << err << " (tolerance " << tol
              << ")");
    std::printf("  %-58s output %d: relative error %.2e\n", what.c_str(), i, err);
    REQUIRE(all_finite(gpu[i]));
    REQUIRE(err <= tol);
  }
}

TEST_CASE("every op matches the CPU oracle (backend harness, three seeds)") {
  for (const uint64_t seed : {1u, 101u, 202u}) {
    const auto mismatches = test::compare_backend_ops(Device::kCuda, /*exact=*/false, seed);
    for (const auto& m : mismatches) UNSCOPED_INFO("seed " << seed << ": " << m.op << ": " << m.detail);
    CHECK(mismatches.empty());
  }
}

// f32 with TF32 off: GEMMs of K terms differ from OpenBLAS's only in summation order, ~1e-7·√K.
constexpr double kF32Tol = 1e-5;

TEST_CASE("bf16 operands through the typed kernels: the widened f32 run's bits, rounded once (the staging contract)") {
  // The CUDA typed kernels load bf16 and store rounded bf16 in one pass; computing in f32 in between,
  // they must give exactly what widening, the f32 kernel and one rounding give on this device.
  const std::vector<test::OpMismatch> found = test::compare_bf16_contract(Device::kCuda, test::kOwnBf16Kernels, 3);
  for (const test::OpMismatch& m : found) FAIL_CHECK(m.op << ": " << m.detail);
  CHECK(found.empty());
}

TEST_CASE("matmul at GPT-2 124M sizes and ragged ones, every transpose") {
  struct Mnk {
    int64_t m, n, k;
  };
  for (const Mnk s :
       {Mnk{8192, 2304, 768}, Mnk{8192, 768, 3072}, Mnk{4096, 50304, 768}, Mnk{333, 97, 129}, Mnk{1, 1, 1}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        if (s.m * s.n * s.k > 8192LL * 2304 * 768 && (ta || tb)) continue;  // one big case per shape suffices
        const Tensor a = random_tensor(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 1);
        const Tensor b = random_tensor(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 2);
        const Tensor c = random_tensor({s.m, s.n}, 3);
        auto [cpu, gpu] = run_both({a, b, c}, [&](Tensors& t) { ops::matmul(t[0], ta, t[1], tb, t[2], 0.5f, 1.0f); });
        require_close(fmt::format("matmul {}x{}x{} ta {} tb {} beta 1", s.m, s.n, s.k, ta, tb), cpu, gpu, {2}, kF32Tol);
      }
    }
  }
}

// bf16 matmul: the backend's gemm_bf16 (cuBLASLt: bf16 A and B, CUBLAS_COMPUTE_32F) against the
// CPU's staged one. Both read the same bf16 values exactly (the CPU widens them) and a product of two
// bf16 values is exact in f32, so the f32 results differ only in the order of the k additions: at
// most about 2^-24 √k norm-wise with round-to-nearest (blocked sums do better). Allowed: 16 · 2^-24 ·
// √k ≈ 1e-6 √k, plus 1e-6 for the alpha / beta epilogue: room for the tensor cores' truncating
// alignment, yet at k = 8192 still 18x below one stray bf16 rounding of an f32 output (1.7e-3
// norm-wise). A bf16 output is each side's f32 result rounded once; the two round one bf16 ulp apart
// only where a rounding boundary falls between them, so 2^-8 norm-wise on top.
double bf16_matmul_tolerance(int64_t k, bool bf16_out) {
  const double f32 = 1e-6 * (1.0 + std::sqrt(static_cast<double>(k)));
  return bf16_out ? f32 + 1.0 / 256 : f32;
}

TEST_CASE("bf16 matmul at GPT-2 124M sizes and ragged ones: bf16 and f32 outputs, beta 0 and 1") {
  struct Gemm {
    int64_t m, n, k;
    bool ta, tb;
  };
  // The model's products at B·T = 8192 tokens (linear.cc: y = x W^T, dx = dy W, dW += dy^T x into the
  // f32 main grad; lm_head.cc), then ragged shapes (odd leading dims: 2-byte aligned bf16 rows) with
  // every transpose.
  std::vector<Gemm> gemms = {
      {8192, 2304, 768, false, true},    // qkv forward
      {8192, 768, 3072, false, true},    // mlp projection forward
      {8192, 768, 3072, false, false},   // mlp fc dgrad
      {3072, 768, 8192, true, false},    // mlp fc wgrad
      {4096, 50304, 768, false, true},   // LM head forward
  };
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      gemms.push_back({333, 97, 129, ta, tb});
      gemms.push_back({1, 1, 1, ta, tb});
    }
  }
  for (const Gemm& g : gemms) {
    const Tensors draws{random_tensor(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, 1),
                        random_tensor(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, 2), random_tensor({g.m, g.n}, 3)};
    for (const bool bf16_out : {true, false}) {
      for (const float beta : {0.0f, 1.0f}) {
        const Tensors inputs = test::with_bf16(draws, bf16_out ? std::vector{0, 1, 2} : std::vector{0, 1});
        auto [cpu, gpu] =
            run_both(inputs, [&](Tensors& t) { ops::matmul(t[0], g.ta, t[1], g.tb, t[2], 0.5f, beta); });
        require_close(fmt::format("bf16 matmul {}x{}x{} ta {} tb {} -> {} beta {}", g.m, g.n, g.k, g.ta, g.tb,
                                  bf16_out ? "bf16" : "f32", beta),
                      cpu, gpu, {2}, bf16_matmul_tolerance(g.k, bf16_out));
      }
    }
  }
}

// The linear layers' forward with the bias in cuBLASLt's epilogue, against the CPU's matmul then
// add_bias: tolerances as the plain GEMMs' (the bias add is one f32 addition of the same values on
// both sides), plus one bf16 ulp (2^-8 norm-wise) in bf16, where the CPU rounds c after the product
// and again after the bias and the epilogue rounds once. A bias at an odd offset is declined and
// takes the GEMM, then the bias kernel, as the CPU.
TEST_CASE("matmul_bias at GPT-2 124M sizes, f32 and bf16, aligned and odd bias offsets") {
  struct Linear {
    int64_t m, n, k;
  };
  for (const Linear g : {Linear{8192, 2304, 768}, Linear{8192, 3072, 768}, Linear{333, 97, 129}}) {
    const Tensors draws{random_tensor({g.m, g.k}, 1), random_tensor({g.n, g.k}, 2), random_tensor({g.n + 1}, 3),
                        random_tensor({g.m, g.n}, 4)};
    for (const bool bf16 : {false, true}) {
      for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
        const Tensors inputs = bf16 ? test::with_bf16(draws, {0, 1, 2, 3}) : draws;
        auto [cpu, gpu] = run_both(inputs, [&](Tensors& t) {
          const Tensor bias = t[2].slice_flat(offset, {g.n});
          ops::matmul_bias(t[0], false, t[1], true, bias, t[3]);
        });
        const double tol = bf16 ? bf16_matmul_tolerance(g.k, true) : kF32Tol;
        require_close(fmt::format("matmul_bias {}x{}x{} {} bias offset {}", g.m, g.n, g.k, bf16 ? "bf16" : "f32",
                                  offset),
                      cpu, gpu, {3}, bf16 ? tol + 1.0 / 256 : tol);
      }
    }
  }
}

// Products that share an operand as one batched GEMM (ops::matmul_group; cuBLASLt's strided batch,
// the bias epilogue with a bias batch stride, stride 0 for the shared operand), laid out as the model
// lays them out: GPT-2 124M's q, k, v (weights and biases alternating in the flat parameter buffer,
// outputs side by side) and their weight gradients accumulated into the f32 gradient buffer, then a
// ragged GQA-like pair without biases (Llama's k, v). Each first checks that the backend's entry takes
// the problem (a declined one would run product by product and prove nothing about the batch), then
// compares the op with the CPU's products one by one, with matmul_bias's and matmul's tolerances.
TEST_CASE("matmul_group: q, k, v and their weight gradients as one batched GEMM, f32 and bf16") {
  struct Group {
    int64_t tokens, out, in, count;
    bool bias;
  };
  const Backend& be = backend_for("matmul_group test", Device::kCuda);
  for (const Group g : {Group{8192, 768, 768, 3, true}, Group{333, 96, 129, 2, false}}) {
    const int64_t block = g.out * g.in + (g.bias ? g.out : 0);
    const Tensors draws{random_tensor({g.tokens, g.in}, 1), random_tensor({g.count * block}, 2),
                        random_tensor({g.count, g.tokens, g.out}, 3), random_tensor({g.count * block}, 4)};
    const auto slices = [](const Tensor& buffer, int64_t count, int64_t step, int64_t first, const Shape& shape) {
      std::vector<Tensor> out;
      for (int64_t i = 0; i < count; ++i) out.push_back(buffer.slice_flat(i * step + first, shape));
      return out;
    };
    for (const bool bf16 : {false, true}) {
      const std::string shape = fmt::format("{} x [{}, {}] <- [{}, {}] {}{}", g.count, g.out, g.in, g.tokens, g.in,
                                            bf16 ? "bf16" : "f32", g.bias ? " with biases" : "");
      // Forward: y_i = x W_i^T (+ b_i); t = {x, params, y}.
      const Tensors forward_in = bf16 ? test::with_bf16({draws[0], draws[1], draws[2]}, {0, 1, 2})
                                      : Tensors{draws[0], draws[1], draws[2]};
      run_on_gpu(forward_in, [&](Tensors& t) {
        const int64_t esize = bf16 ? 2 : 4;
        CHECK(be.gemm_batched(false, true, g.tokens, g.out, g.in, 1.0f, t[0].raw(), g.in, 0, t[1].raw(), g.in, block,
                              bf16, g.bias ? static_cast<const char*>(t[1].raw()) + g.out * g.in * esize : nullptr,
                              block, 0.0f, t[2].raw(), bf16, g.out, g.tokens * g.out, g.count));
      });
      auto [cpu_f, gpu_f] = run_both(forward_in, [&](Tensors& t) {
        std::vector<Tensor> ys = slices(t[2], g.count, g.tokens * g.out, 0, {g.tokens, g.out});
        const std::vector<Tensor> biases = g.bias ? slices(t[1], g.count, block, g.out * g.in, {g.out}) : Tensors{};
        ops::matmul_group({&t[0], 1}, false, slices(t[1], g.count, block, 0, {g.out, g.in}), true, biases, ys);
      });
      const double forward_tol = bf16 ? bf16_matmul_tolerance(g.in, true) + (g.bias ? 1.0 / 256 : 0.0) : kF32Tol;
      require_close("matmul_group forward " + shape, cpu_f, gpu_f, {2}, forward_tol);
      // Weight gradients: dW_i += dy_i^T x into f32; t = {dy, x, grads}.
      const Tensors backward_in = bf16 ? test::with_bf16({draws[2], draws[0], draws[3]}, {0, 1})
                                       : Tensors{draws[2], draws[0], draws[3]};
      run_on_gpu(backward_in, [&](Tensors& t) {
        CHECK(be.gemm_batched(true, false, g.out, g.in, g.tokens, 1.0f, t[0].raw(), g.out, g.tokens * g.out,
                              t[1].raw(), g.in, 0, bf16, nullptr, 0, 1.0f, t[2].raw(), false, g.in, block, g.count));
      });
      auto [cpu_b, gpu_b] = run_both(backward_in, [&](Tensors& t) {
        std::vector<Tensor> grads = slices(t[2], g.count, block, 0, {g.out, g.in});
        ops::matmul_group(slices(t[0], g.count, g.tokens * g.out, 0, {g.tokens, g.out}), true, {&t[1], 1}, false, {},
                          grads, 1.0f, 1.0f);
      });
      require_close("matmul_group weight gradients " + shape, cpu_b, gpu_b, {2},
                    bf16 ? bf16_matmul_tolerance(g.tokens, false) : kF32Tol);
    }
  }
}

// A linear layer's output joining the residual stream (ops::matmul_residual: cuBLASLt reading the
// residual as C with beta 1 and writing c as D, the bias in the epilogue) at GPT-2 124M's two output
// projections, one without a bias (Llama's), and a ragged shape, against the CPU's matmul_bias
// (matmul) then add. Each first checks that the backend's entry takes the problem (a declined one
// would run the separate ops and prove nothing about the fusion). f32: kF32Tol (the epilogue adds the
// same three f32 terms, perhaps in another order). bf16: the CPU rounds c after the product, after the
// bias and after the residual, the epilogue once: the GEMM's bound plus two ulps (2 · 2^-8) norm-wise.
TEST_CASE("matmul_residual: output projections joining the residual stream in one GEMM, f32 and bf16") {
  struct Projection {
    int64_t m, n, k;
    bool bias;
  };
  const Backend& be = backend_for("matmul_residual test", Device::kCuda);
  for (const Projection g : {Projection{8192, 768, 768, true}, Projection{8192, 768, 3072, true},
                             Projection{8192, 768, 3072, false}, Projection{333, 97, 129, true}}) {
    const Tensors draws{random_tensor({g.m, g.k}, 1), random_tensor({g.n, g.k}, 2), random_tensor({g.n}, 3),
                        random_tensor({g.m, g.n}, 4), random_tensor({g.m, g.n}, 5)};
    for (const bool bf16 : {false, true}) {
      const std::string what = fmt::format("matmul_residual {}x{}x{} {}{}", g.m, g.n, g.k, bf16 ? "bf16" : "f32",
                                           g.bias ? " with bias" : "");
      const Tensors inputs = bf16 ? test::with_bf16(draws, {0, 1, 2, 3, 4}) : draws;
      run_on_gpu(inputs, [&](Tensors& t) {
        CHECK(be.gemm_residual(false, true, g.m, g.n, g.k, t[0].raw(), g.k, t[1].raw(), g.k, bf16,
                               g.bias ? t[2].raw() : nullptr, t[3].raw(), t[4].raw(), bf16, g.n));
      });
      auto [cpu, gpu] = run_both(inputs, [&](Tensors& t) {
        ops::matmul_residual(t[0], false, t[1], true, g.bias ? t[2] : Tensor{}, t[3], t[4]);
      });
      require_close(what, cpu, gpu, {4}, bf16 ? bf16_matmul_tolerance(g.k, true) + 2.0 / 256 : kF32Tol);
    }
  }
}

// training.gelu_fusion on while a test runs, off after (the default every other test sees).
struct GeluFusionOn {
  GeluFusionOn() { backend_for("gelu fusion test", Device::kCuda).set_gelu_fusion(true); }
  ~GeluFusionOn() { backend_for("gelu fusion test", Device::kCuda).set_gelu_fusion(false); }
};

// training.gelu_fusion: the GELU MLP's up projection (cuBLASLt's GELU_AUX_BIAS epilogue) and
// down_proj's input gradient with the GELU's backward (DGELU), against the CPU's unfused ops.
// f32: kF32Tol, as every f32 op — so this also measures whether cuBLASLt's undocumented GELU is the
// tanh approximation kernels use (the exact erf GELU differs from it by up to ~1e-3 of |x|).
// bf16: the CPU rounds pre after the product and again after the bias and applies the GELU to the
// rounded pre; the epilogue rounds pre once and applies the GELU to the f32 value. So pre is within
// matmul_bias's bound (one extra ulp, 2^-8), out one ulp more (a GELU's slope is below 1.13, and out
// is rounded once more), and dx, the f32 product times GELU'(pre) rounded once where the CPU rounds
// the product first, within the GEMM's bound plus one ulp.
TEST_CASE("GELU epilogues (training.gelu_fusion) at GPT-2 124M sizes and ragged ones, f32 and bf16") {
  const GeluFusionOn fusion;
  const Backend& be = backend_for("gelu fusion test", Device::kCuda);
  const DeviceContext gpu(Device::kCuda);
  struct Mlp {
    int64_t m, f, h;  // tokens, ffn width (the GELU's), hidden
    bool fused;       // whether the epilogue takes it (f a multiple of 8), else the unfused ops run
  };
  for (const Mlp g : {Mlp{8192, 3072, 768, true}, Mlp{333, 104, 129, true}, Mlp{70, 97, 33, false}}) {
    const Tensors draws{random_tensor({g.m, g.h}, 1), random_tensor({g.f, g.h}, 2), random_tensor({g.f}, 3),
                        random_tensor({g.m, g.f}, 4), random_tensor({g.m, g.f}, 5), random_tensor({g.h, g.f}, 6),
                        random_tensor({g.m, g.f}, 7, -3, 3)};
    for (const bool bf16 : {false, true}) {
      const Tensors inputs = bf16 ? test::with_bf16(draws, {0, 1, 2, 3, 4, 5, 6}) : draws;
      // That the epilogue ran (a declined call falls back to the unfused ops, which would pass too).
      Tensors d;
      for (const Tensor& t : inputs) d.push_back(gpu.to_device(t));
      CHECK(be.gemm_gelu(false, true, g.m, g.f, g.h, d[0].raw(), g.h, d[1].raw(), g.h, bf16, d[2].raw(), d[3].raw(),
                         d[4].raw(), bf16, g.f) == g.fused);
      CHECK(be.gemm_dgelu(false, false, g.m, g.f, g.h, d[0].raw(), g.h, d[5].raw(), g.f, bf16, d[6].raw(), d[3].raw(),
                          bf16, g.f) == g.fused);

      const std::string shape = fmt::format("{}x{}x{} {}", g.m, g.f, g.h, bf16 ? "bf16" : "f32");
      const double gemm_tol = bf16 ? bf16_matmul_tolerance(g.h, true) : kF32Tol;
      // Forward: pre = x W^T + b, out = gelu(pre). Backward: dx = gelu'(pre) * (dy W_down), with the
      // draws reused as dy [m, h], W_down [h, f] and pre [m, f], dx overwriting t[3].
      auto [cpu_f, gpu_f] =
          run_both(inputs, [&](Tensors& t) { ops::matmul_bias_gelu(t[0], false, t[1], true, t[2], t[3], t[4]); });
      require_close("matmul_bias_gelu pre " + shape, cpu_f, gpu_f, {3}, bf16 ? gemm_tol + 1.0 / 256 : gemm_tol);
      require_close("matmul_bias_gelu out " + shape, cpu_f, gpu_f, {4}, bf16 ? gemm_tol + 2.0 / 256 : gemm_tol);
      auto [cpu_b, gpu_b] =
          run_both(inputs, [&](Tensors& t) { ops::matmul_gelu_backward(t[0], false, t[5], false, t[6], t[3]); });
      require_close("matmul_gelu_backward dx " + shape, cpu_b, gpu_b, {3}, bf16 ? gemm_tol + 1.0 / 256 : gemm_tol);
    }
  }
}

// training.bias_grad_fusion: a linear layer's weight gradient with its bias gradient in the GEMM's
// BGRADB epilogue (ops::linear_weight_grad), against the CPU's matmul then bias_backward, both
// accumulating into f32 gradients that start from random values. dW is the bf16 GEMM's case (f32
// out, beta 1); db sums k products of 1 and a bf16 (or f32) value, exact in f32, in another order
// (the algorithm's, then added to db; the CPU adds row by row into db): the same 2^-24 √k bound.
// Then the off switch and a layer wider than the scratch vector decline, and two runs agree bit for bit.
TEST_CASE("weight-gradient matmul with the bias-gradient epilogue (training.bias_grad_fusion), GPT-2 124M and ragged sizes") {
  const Backend& be = backend_for("bias grad fusion test", Device::kCuda);
  be.set_bias_grad_fusion(true);
  const DeviceContext gpu(Device::kCuda);
  struct Layer {
    int64_t rows, out, in;  // tokens, output features (the bias's), input features
    bool fused;             // whether the epilogue takes it (out within the scratch vector)
  };
  for (const Layer g : {Layer{8192, 3072, 768, true}, Layer{8192, 768, 768, true}, Layer{333, 104, 129, true},
                        Layer{3, 70000, 5, false}}) {
    const Tensors draws{random_tensor({g.rows, g.out}, 31), random_tensor({g.rows, g.in}, 32),
                        random_tensor({g.out, g.in}, 33), random_tensor({g.out}, 34)};
    for (const bool bf16 : {false, true}) {
      const Tensors inputs = bf16 ? test::with_bf16(draws, {0, 1}) : draws;
      Tensors d;
      for (const Tensor& t : inputs) d.push_back(gpu.to_device(t));
      // That the epilogue ran (a declined call falls back to the unfused ops, which would pass too).
      CHECK(be.gemm_bias_grad(g.out, g.in, g.rows, d[0].raw(), g.out, d[1].raw(), g.in, bf16, d[2].f32(),
                              d[3].f32()) == g.fused);
      const std::string shape = fmt::format("{}x{}x{} {}", g.rows, g.out, g.in, bf16 ? "bf16" : "f32");
      const auto run = [](Tensors& t) { ops::linear_weight_grad(t[0], t[1], t[2], t[3]); };
      auto [cpu, gpu_out] = run_both(inputs, run);
      const double tol = bf16 ? bf16_matmul_tolerance(g.rows, false) : kF32Tol;
      require_close("linear_weight_grad dW " + shape, cpu, gpu_out, {2}, tol);
      require_close("linear_weight_grad db " + shape, cpu, gpu_out, {3}, tol);
      auto [cpu2, gpu2] = run_both(inputs, run);
      for (int i : {2, 3}) CHECK(std::memcmp(gpu_out[i].raw(), gpu2[i].raw(), gpu_out[i].bytes()) == 0);
    }
  }
  be.set_bias_grad_fusion(false);  // the default every other test sees
  const Tensor dy = gpu.to_device(random_tensor({64, 32}, 35)), x = gpu.to_device(random_tensor({64, 16}, 36));
  Tensor dw = gpu.to_device(random_tensor({32, 16}, 37)), db = gpu.to_device(random_tensor({32}, 38));
  CHECK_FALSE(be.gemm_bias_grad(32, 16, 64, dy.raw(), 32, x.raw(), 16, false, dw.f32(), db.f32()));
}

TEST_CASE("attention at GPT-2 sizes (MHA) and ragged GQA ones, forward and backward, both CUDA paths") {
  struct Att {
    int64_t b, t, hq, hkv, d;
  };
  // The backend picks the GEMM path when its score buffers fit, else the flash kernel: check each.
  for (const char* path : {"flash", "gemm"}) {
    for (const Att s : {Att{2, 1024, 12, 12, 64}, Att{1, 257, 8, 2, 80}, Att{3, 100, 6, 3, 32}, Att{1, 70, 4, 1, 128},
                        Att{2, 33, 2, 2, 16}}) {
      ::setenv("LATTICE_CUDA_ATTENTION", path, 1);
      const Tensor q = random_tensor({s.b, s.t, s.hq, s.d}, 11, -2, 2),
                   k = random_tensor({s.b, s.t, s.hkv, s.d}, 12, -2, 2), v = random_tensor({s.b, s.t, s.hkv, s.d}, 13),
                   dout = random_tensor({s.b, s.t, s.hq, s.d}, 14);
      const Tensor out = Tensor::zeros({s.b, s.t, s.hq, s.d}), lse = Tensor::zeros({s.b, s.hq, s.t});
      const Tensor dq = Tensor::zeros(q.shape()), dk = Tensor::zeros(k.shape()), dv = Tensor::zeros(v.shape());
      auto [cpu, gpu] = run_both({q, k, v, out, lse, dout, dq, dk, dv}, [](Tensors& t) {
        ops::attention_forward(t[0], t[1], t[2], t[3], t[4]);
        ops::attention_backward(t[5], t[0], t[1], t[2], t[3], t[4], t[6], t[7], t[8]);
      });
      ::unsetenv("LATTICE_CUDA_ATTENTION");
      require_close(fmt::format("attention ({}) B{} T{} Hq{} Hkv{} D{}", path, s.b, s.t, s.hq, s.hkv, s.d), cpu, gpu,
                    {3, 4, 6, 7, 8}, 1e-5);
    }
  }
}

// bf16 attention: cuDNN's SDPA on the GPU against the CPU's staged path (bf16 inputs widened exactly,
// f32 attention, outputs rounded to bf16). Both see the same bf16 values and compute the scores
// and softmax in f32, so the lse agrees to f32 summation order (1e-5). cuDNN then multiplies the
// probabilities in bf16 (a rounding of 2^-9 relative each) and both round the output once, at most an
// ulp apart where a rounding boundary falls between them: 2^-9 + 2^-8 norm-wise for out, about
// 6e-3; allowed 1e-2. The gradients chain two more bf16 products (dP = dO·V^T and dS's use) on top
// of the rounded P and the output's rounding: allowed 3e-2, still ten times below what a wrong mask,
// scale or head mapping gives (an O(1) norm-wise error).
TEST_CASE("bf16 attention through cuDNN's SDPA: MHA at GPT-2 sizes and ragged GQA shapes, forward and backward") {
  struct Att {
    int64_t b, t, hq, hkv, d;
  };
  for (const Att s : {Att{2, 1024, 12, 12, 64}, Att{1, 257, 8, 2, 80}, Att{3, 100, 6, 3, 32}, Att{1, 70, 4, 1, 128},
                      Att{2, 33, 2, 2, 16}}) {
    const Tensor q = random_tensor({s.b, s.t, s.hq, s.d}, 11, -2, 2),
                 k = random_tensor({s.b, s.t, s.hkv, s.d}, 12, -2, 2), v = random_tensor({s.b, s.t, s.hkv, s.d}, 13),
                 dout = random_tensor({s.b, s.t, s.hq, s.d}, 14);
    const Tensor out = Tensor::zeros({s.b, s.t, s.hq, s.d}), lse = Tensor::zeros({s.b, s.hq, s.t});
    const Tensor dq = Tensor::zeros(q.shape()), dk = Tensor::zeros(k.shape()), dv = Tensor::zeros(v.shape());
    // Everything bf16 but the lse.
    const Tensors inputs = test::with_bf16({q, k, v, out, lse, dout, dq, dk, dv}, {0, 1, 2, 3, 5, 6, 7, 8});
    // cuDNN must take every one of these shapes: a refusal is an error here, not the f32 fallback.
    ::setenv("LATTICE_CUDA_ATTENTION", "cudnn", 1);
    const auto run = [](Tensors& t) {
      ops::attention_forward(t[0], t[1], t[2], t[3], t[4]);
      ops::attention_backward(t[5], t[0], t[1], t[2], t[3], t[4], t[6], t[7], t[8]);
    };
    auto [cpu, gpu] = run_both(inputs, run);
    const std::string what = fmt::format("bf16 attention (cuDNN) B{} T{} Hq{} Hkv{} D{}", s.b, s.t, s.hq, s.hkv, s.d);
    require_close(what + " lse", cpu, gpu, {4}, 1e-5);
    require_close(what + " out", cpu, gpu, {3}, 1e-2);
    require_close(what + " dq, dk, dv", cpu, gpu, {6, 7, 8}, 3e-2);
    // Deterministic: a second GPU run gives the same bits.
    auto [cpu2, gpu2] = run_both(inputs, run);
    ::unsetenv("LATTICE_CUDA_ATTENTION");
    for (int i : {3, 4, 6, 7, 8})
      CHECK(std::memcmp(gpu[i].raw(), gpu2[i].raw(), gpu[i].bytes()) == 0);
  }
}

TEST_CASE("loss, norms, embeddings and activations at GPT-2 124M sizes") {
  const int64_t rows = 4096, hidden = 768, vocab = 50257;
  {
    const Tensor logits = random_tensor({512, vocab}, 21, -4, 4), targets = ids(512, vocab, 22);
    const Tensor losses = Tensor::zeros({512}), lse = Tensor::zeros({512}), dlogits = Tensor::zeros({512, vocab});
    auto [cpu, gpu] = run_both({logits, targets, losses, lse, dlogits}, [](Tensors& t) {
      ops::cross_entropy_forward(t[0], t[1], t[2], t[3]);
      ops::cross_entropy_backward(t[0], t[1], t[3], 1.0f / 512, t[4]);
    });
    require_close("cross-entropy 512 x 50257", cpu, gpu, {2, 3, 4}, kF32Tol);
  }
  {
    // The fused classifier at the padded vocabulary (rows 16-byte aligned: the packed path), its
    // gradient in place of the logits as the LM head has it: within the tolerance of the CPU, and
    // on the GPU the bits of the forward and backward it replaces.
    const int64_t padded = 50304;
    const Tensor logits = random_tensor({512, padded}, 23, -4, 4), targets = ids(512, padded, 24);
    const Tensor losses = Tensor::zeros({512}), lse = Tensor::zeros({512});
    auto fused = [](Tensors& t) { ops::cross_entropy_forward_backward(t[0], t[1], 1.0f / 512, t[2], t[3], t[0]); };
    auto [cpu, gpu] = run_both({logits, targets, losses, lse}, fused);
    require_close("fused cross-entropy 512 x 50304, in place", cpu, gpu, {0, 2, 3}, kF32Tol);
    const Tensors unfused = run_on_gpu({logits, targets, losses, lse}, [](Tensors& t) {
      ops::cross_entropy_forward(t[0], t[1], t[2], t[3]);
      ops::cross_entropy_backward(t[0], t[1], t[3], 1.0f / 512, t[0]);
    });
    for (int i : {0, 2, 3}) {
      INFO("fused against forward + backward on the GPU: output " << i);
      REQUIRE(std::memcmp(gpu[i].raw(), unfused[i].raw(), gpu[i].bytes()) == 0);
    }
  }
  {
    const Tensor x = random_tensor({rows, hidden}, 31), gamma = random_tensor({hidden}, 32),
                 beta = random_tensor({hidden}, 33), dy = random_tensor({rows, hidden}, 34);
    const Tensor y = Tensor::zeros({rows, hidden}), mean = Tensor::zeros({rows}), rstd = Tensor::zeros({rows});
    const Tensor dx = Tensor::zeros({rows, hidden}), dgamma = random_tensor({hidden}, 35),
                 dbeta = random_tensor({hidden}, 36);
    auto [cpu, gpu] = run_both({x, gamma, beta, y, mean, rstd, dy, dx, dgamma, dbeta}, [](Tensors& t) {
      ops::layernorm_forward(t[0], t[1], t[2], 1e-5f, t[3], t[4], t[5]);
      ops::layernorm_backward(t[6], t[0], t[1], t[4], t[5], t[7], t[8], t[9]);
    });
    require_close("layernorm 4096 x 768", cpu, gpu, {3, 4, 5, 7, 8, 9}, kF32Tol);
  }
  {
    const Tensor table = random_tensor({vocab, hidden}, 41), tok = ids(rows, vocab, 42),
                 dout = random_tensor({rows, hidden}, 43);
    const Tensor out = Tensor::zeros({rows, hidden}), dtable = random_tensor({vocab, hidden}, 44);
    auto [cpu, gpu] = run_both({tok, table, out, dout, dtable}, [](Tensors& t) {
      ops::embedding_forward(t[0], t[1], t[2]);
      ops::embedding_backward(t[0], t[3], t[4]);
    });
    require_close("embedding 4096 tokens x 768", cpu, gpu, {2, 4}, kF32Tol);
  }
  {
    const Tensor x = random_tensor({rows, 4 * hidden}, 51, -5, 5), dy = random_tensor({rows, 4 * hidden}, 52);
    const Tensor y = Tensor::zeros(x.shape()), dx = Tensor::zeros(x.shape());
    auto [cpu, gpu] = run_both({x, y, dy, dx}, [](Tensors& t) {
      ops::gelu_forward(t[0], t[1]);
      ops::gelu_backward(t[2], t[0], t[3]);
    });
    require_close("gelu 4096 x 3072", cpu, gpu, {1, 3}, kF32Tol);
  }
}

// The bias gradient at the model's shapes: GPT-2 124M's four linear layers' widths over a micro-batch
// of 8 × 1024 tokens, and ragged ones (a column tile and a row chunk left over), with dy f32 and bf16
// (the recipe's activation gradient) into an f32 gradient that already holds values (+=). The GPU
// sums in double, the CPU in float row by row: they differ by the CPU's rounding, ~1e-7·√rows.
TEST_CASE("bias_backward at GPT-2 124M shapes and ragged ones, dy f32 and bf16") {
  struct Shape2 {
    int64_t rows, cols;
  };
  for (const Shape2 s : {Shape2{8192, 768}, Shape2{8192, 2304}, Shape2{8192, 3072}, Shape2{1000, 777}, Shape2{7, 33}}) {
    for (const bool bf16 : {false, true}) {
      const Tensor dy = random_tensor({s.rows, s.cols}, 91), dbias = random_tensor({s.cols}, 92);
      const Tensors inputs = bf16 ? test::with_bf16({dy, dbias}, {0}) : Tensors{dy, dbias};
      auto [cpu, gpu] = run_both(inputs, [](Tensors& t) { ops::bias_backward(t[0], t[1]); });
      require_close(fmt::format("bias_backward {} x {} dy {}", s.rows, s.cols, bf16 ? "bf16" : "f32"), cpu, gpu, {1},
                    kF32Tol);
    }
  }
}

// The q, k and v bias gradients in one launch (ops::bias_backward_group, the model's
// backward_weights_group): on the device, the bits of bias_backward per product, at GPT-2 124M's and
// 1.5B's widths and a ragged shape, dy f32 and bf16 (the products' dy are slices of one buffer, as
// model/activations.cc lays them out); five products (a launch of four, then one); and products of
// two shapes, which run one by one.
TEST_CASE("bias_backward_group: the bits of bias_backward per product, in one launch") {
  struct Group {
    int64_t count, rows, cols;
  };
  for (const Group g : {Group{3, 8192, 768}, Group{3, 4096, 1600}, Group{5, 1000, 777}}) {
    for (const bool bf16 : {false, true}) {
      const Tensor dy = random_tensor({g.count, g.rows, g.cols}, 93), dbias = random_tensor({g.count * g.cols}, 94);
      const Tensors inputs = bf16 ? test::with_bf16({dy, dbias}, {0}) : Tensors{dy, dbias};
      const auto products = [&g](Tensors& t, bool grouped) {
        std::vector<Tensor> dys, dbiases;
        for (int64_t i = 0; i < g.count; ++i) {
          dys.push_back(t[0].slice_flat(i * g.rows * g.cols, {g.rows, g.cols}));
          dbiases.push_back(t[1].slice_flat(i * g.cols, {g.cols}));
        }
        if (grouped) return ops::bias_backward_group(dys, dbiases);
        for (int64_t i = 0; i < g.count; ++i) ops::bias_backward(dys[i], dbiases[i]);
      };
      const Tensors grouped = run_on_gpu(inputs, [&](Tensors& t) { products(t, true); });
      const Tensors separate = run_on_gpu(inputs, [&](Tensors& t) { products(t, false); });
      const std::string what =
          fmt::format("bias_backward_group {} x {} x {} dy {}", g.count, g.rows, g.cols, bf16 ? "bf16" : "f32");
      INFO(what);
      REQUIRE(std::memcmp(grouped[1].raw(), separate[1].raw(), grouped[1].bytes()) == 0);
      std::printf("  %-58s the bits of bias_backward per product\n", what.c_str());
    }
  }
  // Two shapes: per product, still the bits of bias_backward.
  const Tensor a = random_tensor({300, 64}, 95), b = random_tensor({200, 64}, 96), dbias = random_tensor({128}, 97);
  const auto products = [](Tensors& t, bool grouped) {
    const std::vector<Tensor> dys = {t[0], t[1]};
    std::vector<Tensor> dbiases = {t[2].slice_flat(0, {64}), t[2].slice_flat(64, {64})};
    if (grouped) return ops::bias_backward_group(dys, dbiases);
    for (size_t i = 0; i < dys.size(); ++i) ops::bias_backward(dys[i], dbiases[i]);
  };
  const Tensors grouped = run_on_gpu({a, b, dbias}, [&](Tensors& t) { products(t, true); });
  const Tensors separate = run_on_gpu({a, b, dbias}, [&](Tensors& t) { products(t, false); });
  REQUIRE(std::memcmp(grouped[2].raw(), separate[2].raw(), grouped[2].bytes()) == 0);
}

// The staging contract at GPT-2 sizes (more rows than the harness's ragged shapes, so the chunked
// parameter-gradient and bias sums run several chunks): `op` on the GPU with the `bf16` arguments in
// bf16 (the mixed-precision recipe's dtypes) against `op` on the same values widened to f32, the
// bf16 arguments then rounded once. Bit for bit.
void require_staging_bits(const std::string& what, const Tensors& inputs, const std::vector<int>& bf16,
                          const std::function<void(Tensors&)>& op) {
  const DeviceContext gpu(Device::kCuda);
  const Tensors rounded = test::with_bf16(inputs, bf16);
  Tensors typed, widened;
  for (const Tensor& t : rounded) typed.push_back(gpu.to_device(t));
  for (const Tensor& t : test::widened(rounded)) widened.push_back(gpu.to_device(t));
  op(typed);
  op(widened);
  for (size_t i = 0; i < rounded.size(); ++i) {
    const Tensor got = gpu.to_host(typed[i]);
    const Tensor f32 = gpu.to_host(widened[i]);
    const Tensor want = rounded[i].dtype() == DType::kBF16 ? test::with_bf16({f32}, {0})[0] : f32;
    INFO(what << ": argument " << i << " " << rounded[i].describe());
    REQUIRE(std::memcmp(got.raw(), want.raw(), got.bytes()) == 0);
  }
  std::printf("  %-58s bf16: the staging contract's bits\n", what.c_str());
}

TEST_CASE("bf16 loss, norms, embeddings and activations at GPT-2 124M sizes: the staging contract's bits") {
  const int64_t rows = 4096, hidden = 768, vocab = 50257;
  {
    const Tensor logits = random_tensor({512, vocab}, 21, -4, 4), targets = ids(512, vocab, 22);
    const Tensor losses = Tensor::zeros({512}), lse = Tensor::zeros({512}), dlogits = Tensor::zeros({512, vocab});
    require_staging_bits("cross-entropy 512 x 50257", {logits, targets, losses, lse, dlogits}, {0, 4}, [](Tensors& t) {
      ops::cross_entropy_forward(t[0], t[1], t[2], t[3]);
      ops::cross_entropy_backward(t[0], t[1], t[3], 1.0f / 512, t[4]);
    });
    const Tensor padded_logits = random_tensor({512, 50304}, 23, -4, 4), padded_targets = ids(512, 50304, 24);
    require_staging_bits("fused cross-entropy 512 x 50304, in place", {padded_logits, padded_targets, losses, lse},
                         {0}, [](Tensors& t) {
                           ops::cross_entropy_forward_backward(t[0], t[1], 1.0f / 512, t[2], t[3], t[0]);
                         });
  }
  {
    const Tensor x = random_tensor({rows, hidden}, 31), gamma = random_tensor({hidden}, 32),
                 beta = random_tensor({hidden}, 33), dy = random_tensor({rows, hidden}, 34);
    const Tensor y = Tensor::zeros({rows, hidden}), mean = Tensor::zeros({rows}), rstd = Tensor::zeros({rows});
    const Tensor dx = Tensor::zeros({rows, hidden}), dgamma = random_tensor({hidden}, 35),
                 dbeta = random_tensor({hidden}, 36);
    // Activations and parameters bf16, parameter gradients f32 (main_grad).
    require_staging_bits("layernorm 4096 x 768", {x, gamma, beta, y, mean, rstd, dy, dx, dgamma, dbeta},
                         {0, 1, 2, 3, 6, 7}, [](Tensors& t) {
                           ops::layernorm_forward(t[0], t[1], t[2], 1e-5f, t[3], t[4], t[5]);
                           ops::layernorm_backward(t[6], t[0], t[1], t[4], t[5], t[7], t[8], t[9]);
                         });
    require_staging_bits("rmsnorm 4096 x 768", {x, gamma, y, rstd, dy, dx, dgamma}, {0, 1, 2, 4, 5},
                         [](Tensors& t) {
                           ops::rmsnorm_forward(t[0], t[1], 1e-5f, t[2], t[3]);
                           ops::rmsnorm_backward(t[4], t[0], t[1], t[3], t[5], t[6]);
                         });
    const Tensor bias = random_tensor({hidden}, 37), dbias = random_tensor({hidden}, 38);
    require_staging_bits("bias 4096 x 768", {y, bias, dy, dbias}, {0, 1, 2}, [](Tensors& t) {
      ops::add_bias(t[0], t[1]);
      ops::bias_backward(t[2], t[3]);
    });
  }
  {
    const Tensor table = random_tensor({vocab, hidden}, 41), tok = ids(rows, vocab, 42),
                 dout = random_tensor({rows, hidden}, 43);
    const Tensor out = Tensor::zeros({rows, hidden}), dtable = random_tensor({vocab, hidden}, 44);
    require_staging_bits("embedding 4096 tokens x 768", {tok, table, out, dout, dtable}, {1, 2, 3}, [](Tensors& t) {
      ops::embedding_forward(t[0], t[1], t[2]);
      ops::embedding_backward(t[0], t[3], t[4]);
    });
  }
  {
    const Tensor x = random_tensor({rows, 4 * hidden}, 51, -5, 5), dy = random_tensor({rows, 4 * hidden}, 52);
    const Tensor y = Tensor::zeros(x.shape()), dx = Tensor::zeros(x.shape());
    require_staging_bits("gelu 4096 x 3072", {x, y, dy, dx}, {0, 1, 2, 3}, [](Tensors& t) {
      ops::gelu_forward(t[0], t[1]);
      ops::gelu_backward(t[2], t[0], t[3]);
    });
    // The backward's dy is an input of its own: the forward's output would reach it rounded to bf16
    // in one run and not in the other (found by the CPU emulator, tests/cuda_emu).
    const Tensor up = random_tensor(x.shape(), 53), dgate = Tensor::zeros(x.shape()), dup = Tensor::zeros(x.shape());
    require_staging_bits("swiglu 4096 x 3072", {x, up, y, dy, dgate, dup}, {0, 1, 2, 3, 4, 5}, [](Tensors& t) {
      ops::swiglu_forward(t[0], t[1], t[2]);
      ops::swiglu_backward(t[3], t[0], t[1], t[4], t[5]);
    });
  }
  {
    // Forward and backward on tensors of their own: in place, the forward's result would reach the
    // backward rounded to bf16 in one run and not in the other (found by the CPU emulator).
    const Tensor q = random_tensor({4, 1024, 12, 64}, 61), dq = random_tensor({4, 1024, 12, 64}, 62);
    require_staging_bits("rope 4 x 1024 x 12 x 64", {q, dq}, {0, 1}, [](Tensors& t) {
      ops::rope_forward(t[0], 10000.0f);
      ops::rope_backward(t[1], 10000.0f);
    });
  }
}

// The decoder's norm backwards add the residual path's gradient in their own pass over dx: on the
// device that must give exactly the bits of the norm backward followed by ops::add — in bf16 the
// sum of the stored (rounded) dx and the residual gradient, rounded again — at GPT-2 124M's width
// and a ragged one (packs left over), f32 and bf16 activation gradients.
TEST_CASE("norm backwards with the residual gradient: on the device, the bits of the norm backward, then add") {
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{4096, 768}, {333, 129}}) {
    const Tensor x = random_tensor({rows, hidden}, 81), gamma = random_tensor({hidden}, 82),
                 beta = random_tensor({hidden}, 83), dy = random_tensor({rows, hidden}, 84),
                 residual = random_tensor({rows, hidden}, 85), dgamma = random_tensor({hidden}, 86),
                 dbeta = random_tensor({hidden}, 87);
    const Tensor y = Tensor::zeros({rows, hidden}), mean = Tensor::zeros({rows}), rstd = Tensor::zeros({rows}),
                 dx = Tensor::zeros({rows, hidden});
    for (const bool bf16 : {false, true}) {
      // x, y, dy, dx and the residual gradient bf16 in the recipe's run; statistics and gains' gradients f32.
      const Tensors inputs = test::with_bf16({x, gamma, beta, y, mean, rstd, dy, dx, dgamma, dbeta, residual},
                                             bf16 ? std::vector<int>{0, 3, 6, 7, 10} : std::vector<int>{});
      for (const bool rms : {false, true}) {
        const auto backward = [rms](Tensors& t, bool fused) {
          const Tensor none;
          if (rms) {
            ops::rmsnorm_forward(t[0], t[1], 1e-5f, t[3], t[5]);
            ops::rmsnorm_backward(t[6], t[0], t[1], t[5], t[7], t[8], fused ? t[10] : none);
          } else {
            ops::layernorm_forward(t[0], t[1], t[2], 1e-5f, t[3], t[4], t[5]);
            ops::layernorm_backward(t[6], t[0], t[1], t[4], t[5], t[7], t[8], t[9], fused ? t[10] : none);
          }
          if (!fused) ops::add(t[7], t[10], t[7]);
        };
        const Tensors fused = run_on_gpu(inputs, [&](Tensors& t) { backward(t, true); });
        const Tensors separate = run_on_gpu(inputs, [&](Tensors& t) { backward(t, false); });
        const std::string what = fmt::format("{} backward + residual {} x {}, {}", rms ? "rmsnorm" : "layernorm",
                                             rows, hidden, bf16 ? "bf16" : "f32");
        for (size_t i = 0; i < inputs.size(); ++i) {
          INFO(what << ": argument " << i << " " << inputs[i].describe());
          REQUIRE(std::memcmp(fused[i].raw(), separate[i].raw(), fused[i].bytes()) == 0);
        }
        std::printf("  %-58s the bits of backward, then add\n", what.c_str());
      }
    }
  }
}

TEST_CASE("adamw_update_runs: 140 runs in two launches, the bits of adamw_update per run then a cast, near the CPU") {
  // apart: the gradients and the copy addressed apart from the values and moments (AdamWRun::
  // grad_offset), as the distributed optimizer's in-place reduce-scatter leaves them: in a buffer
  // twice as long, each run at 2 × its offset + 11. values_apart: the values there too and no copy
  // (ValuesAt::kGradients: fp32 parameters that are their own main shard).
  for (const int mode : {0, 1, 2}) {
    const bool apart = mode >= 1, values_apart = mode == 2;
    const ValuesAt values_at = values_apart ? ValuesAt::kGradients : ValuesAt::kMoments;
    {
      CAPTURE(apart, values_apart);
      // A model's runs: matrices with decay between vectors without, gaps of a shard's foreign elements.
      std::vector<AdamWRun> runs;
      int64_t at = 0;
      for (int64_t l = 0; l < 70; ++l) {
        const int64_t matrix = l % 3 == 0 ? 8192 + 7 : 3 * 1024 + 1;
        runs.push_back({at, matrix, true, apart ? 2 * at + 11 : -1});
        at += matrix;
        runs.push_back({at, 768 + l, false, apart ? 2 * at + 11 : -1});
        at += 768 + l + (l % 10 == 9 ? 5 : 0);
      }
      const int64_t n = at + 3, grads_n = apart ? 2 * n + 11 : n;
      const AdamWHyper hyper{0.9, 0.95, 1e-8, 0.1};
      Tensor sentinel = Tensor::zeros({grads_n}, DType::kBF16);  // outside the runs the copy keeps it
      ops::fill(sentinel, 7.0f);
      const Tensors inputs = {random_tensor({values_apart ? grads_n : n}, 91), random_tensor({grads_n}, 92),
                              random_tensor({n}, 93, -0.1f, 0.1f), random_tensor({n}, 94, 0.0f, 0.1f), sentinel};
      const auto fused = [&](Tensors& t) {
        const Tensor copy = values_apart ? Tensor() : t[4];
        adamw_update_runs(t[0], t[1], t[2], t[3], runs, hyper, 3e-4, 1, 0.5f, copy, values_at);
        adamw_update_runs(t[0], t[1], t[2], t[3], runs, hyper, 3e-4, 2, 0.5f, copy, values_at);
      };
      const auto per_run = [&](Tensors& t) {
        for (const int64_t step : {1, 2}) {
          for (const AdamWRun& r : runs) {
            Tensor p = t[0].slice_flat(values_apart ? r.grads_at() : r.offset, {r.numel});
            Tensor g = t[1].slice_flat(r.grads_at(), {r.numel});
            Tensor m = t[2].slice_flat(r.offset, {r.numel}), v = t[3].slice_flat(r.offset, {r.numel});
            ops::adamw_update(p, g, m, v,
                              {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .weight_decay = r.decay ? 0.1f : 0.0f, .step = step, .grad_scale = 0.5f});
            if (values_apart) continue;
            Tensor dst = t[4].slice_flat(r.grads_at(), {r.numel});
            ops::cast(p, dst);
          }
        }
      };
      const Tensors got = run_on_gpu(inputs, fused);
      const Tensors want = run_on_gpu(inputs, per_run);
      for (size_t i = 0; i < inputs.size(); ++i) {
        INFO("argument " << i << " " << inputs[i].describe());
        REQUIRE(std::memcmp(got[i].raw(), want[i].raw(), got[i].bytes()) == 0);
      }
      const char* label = values_apart ? "adamw_update_runs, 140 runs, values and gradients apart"
                          : apart      ? "adamw_update_runs, 140 runs, gradients apart"
                                       : "adamw_update_runs, 140 runs, bf16 copy";
      std::printf("  %-58s the bits of adamw_update per run%s\n", label, values_apart ? "" : ", then cast");
      const auto [cpu, gpu] = run_both(inputs, fused);
      require_close(std::string(label) + ", two steps", cpu, gpu, {0, 2, 3}, 1e-6);
      // The copy: the rounding of values within 1e-6 of the CPU's, so at most one bf16 ulp (2^-8) apart.
      if (!values_apart) require_close(std::string(label) + ", the bf16 copy", cpu, gpu, {4}, 1.0 / 256);
    }
  }
}

TEST_CASE("initialization is bit-identical to the CPU's, whole tensor and shard") {
  const DeviceContext gpu(Device::kCuda);
  const Shape global{1000, 37};
  Tensor want = Tensor::empty({250, 37});
  ops::fill_normal(want, global, {500, 0}, 1234, 99, 0.02f);
  Tensor got = gpu.empty({250, 37});
  ops::fill_normal(got, global, {500, 0}, 1234, 99, 0.02f);
  const Tensor back = gpu.to_host(got);
  REQUIRE(std::memcmp(back.raw(), want.raw(), want.bytes()) == 0);
}

TEST_CASE("a copy-stream snapshot sees the compute stream's writes before it and none after the stream waits for it") {
  const DeviceContext gpu(Device::kCuda);
  const int64_t n = int64_t{64} << 20;  // 256 MB: the copy takes long enough for a race to show
  Tensor x = gpu.empty({n});
  Tensor host = gpu.pinned_empty({n});
  ops::fill(x, 1.0f);                                  // compute stream
  const Event copied = ops::copy_to_host_async(x, host);  // copy stream, after the fill
  gpu.stream().wait(copied);                           // the next write waits for the copy
  ops::fill(x, 2.0f);
  copied.synchronize();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += host.f32()[i] != 1.0f;
  CHECK(wrong == 0);
  gpu.stream().synchronize();
  CHECK(gpu.to_host(x).f32()[n - 1] == 2.0f);
}

TEST_CASE("the same inputs give the same bits, run after run") {
  const Tensor q = random_tensor({2, 300, 8, 64}, 61), k = random_tensor({2, 300, 4, 64}, 62),
               v = random_tensor({2, 300, 4, 64}, 63), dout = random_tensor({2, 300, 8, 64}, 64),
               x = random_tensor({600, 512}, 65), gamma = random_tensor({512}, 66), tok = ids(600, 1000, 67);
  auto run = [&] {
    const DeviceContext gpu(Device::kCuda);
    Tensors t;
    for (const Tensor& h : {q, k, v, dout, x, gamma, tok}) t.push_back(gpu.to_device(h));
    Tensor out = gpu.zeros(q.shape()), lse = gpu.zeros({2, 8, 300});
    Tensor dq = gpu.zeros(q.shape()), dk = gpu.zeros(k.shape()), dv = gpu.zeros(v.shape());
    ops::attention_forward(t[0], t[1], t[2], out, lse);
    ops::attention_backward(t[3], t[0], t[1], t[2], out, lse, dq, dk, dv);
    Tensor y = gpu.zeros({600, 512}), rstd = gpu.zeros({600}), dx = gpu.zeros({600, 512}), dgamma = gpu.zeros({512});
    ops::rmsnorm_forward(t[4], t[5], 1e-6f, y, rstd);
    ops::rmsnorm_backward(t[4], t[4], t[5], rstd, dx, dgamma);
    Tensor dtable = gpu.zeros({1000, 512});
    ops::embedding_backward(t[6], t[4], dtable);
    Tensor dbias = gpu.zeros({512});
    ops::bias_backward(t[4], dbias);
    Tensor sums = gpu.zeros({2}, DType::kF64);
    ops::sum_squares_to(dx, sums, 0);
    ops::sum_to(dgamma, sums, 1);
    Tensor logits = gpu.to_device(x), losses = gpu.zeros({600}), row_lse = gpu.zeros({600});
    const Tensor targets = gpu.to_device(ids(600, 512, 68));
    ops::cross_entropy_forward_backward(logits, targets, 0.25f, losses, row_lse, logits);
    Tensors host;
    for (const Tensor& r : {out, lse, dq, dk, dv, y, dx, dgamma, dtable, dbias, sums, logits, losses, row_lse})
      host.push_back(gpu.to_host(r));
    return host;
  };
  const Tensors first = run(), second = run();
  for (size_t i = 0; i < first.size(); ++i) {
    INFO("output " << i << " " << first[i].describe());
    REQUIRE(std::memcmp(first[i].raw(), second[i].raw(), first[i].bytes()) == 0);
  }
}

}  // namespace
}  // namespace lattice
