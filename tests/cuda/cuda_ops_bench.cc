// Where a GPU training step's time goes: each op of kernels/ops.h timed alone on the GPU at GPT-2
// 124M sizes (micro-batch 8 × seq 1024, hidden 768, 12 heads, vocab 50304), with CUDA events —
// the median of 20 runs after 3 warm-ups, on random data. Prints milliseconds, achieved TFLOP/s for
// the matmuls and attention, and GB/s (bytes read + written once) for the memory-bound ops; the
// last column multiplies by how often a micro-batch calls the op (a qkv-sized product stands for
// its dgrad and wgrad; the attention output projection is left out), so the rows add up to an
// estimate of one micro-batch's forward and backward plus one optimizer step.
// Attention is timed on both CUDA paths (flash kernel, GEMMs). Run by tools/gpu/check.sh; not a
// test (it asserts nothing but that the ops run).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

Tensor random_on(const DeviceContext& ctx, const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor host = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = dist(gen);
  return ctx.to_device(host);
}

Tensor ids_on(const DeviceContext& ctx, int64_t n, int32_t vocab, uint32_t seed) {
  Tensor host = Tensor::empty({n}, DType::kI32);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  for (int64_t i = 0; i < n; ++i) host.i32()[i] = dist(gen);
  return ctx.to_device(host);
}

double median_ms(const DeviceContext& ctx, const std::function<void()>& op) {
  for (int i = 0; i < 3; ++i) op();
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    const Event start = ctx.stream().record();
    op();
    const Event end = ctx.stream().record();
    ms.push_back(1e3 * end.seconds_since(start));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double total_ms = 0;

// flops > 0: a compute figure; else bytes: a bandwidth figure. per_step: calls in one step.
void report(const char* name, double ms, double flops, double bytes, int per_step) {
  const double rate = flops > 0 ? flops / (ms * 1e-3) / 1e12 : bytes / (ms * 1e-3) / 1e9;
  total_ms += ms * per_step;
  std::printf("%-44s %8.3f ms  %8.1f %-7s x%-3d = %8.2f ms\n", name, ms, rate, flops > 0 ? "TFLOP/s" : "GB/s",
              per_step, ms * per_step);
}

}  // namespace
}  // namespace lattice

int main() {
  using namespace lattice;
  const DeviceContext ctx(Device::kCuda);
  constexpr int64_t B = 8, T = 1024, H = 768, NH = 12, D = 64, V = 50304, L = 12;
  constexpr int64_t N = B * T;
  std::printf("GPT-2 124M shapes: %lld tokens per micro-batch, hidden %lld, %lld layers, vocab %lld (f32)\n",
              (long long)N, (long long)H, (long long)L, (long long)V);

  const Tensor x = random_on(ctx, {N, H}, 1), w_qkv = random_on(ctx, {H, 3 * H}, 2), w_fc = random_on(ctx, {H, 4 * H}, 3);
  Tensor qkv = ctx.empty({N, 3 * H}), fc = ctx.empty({N, 4 * H}), dw = ctx.zeros({H, 4 * H});
  const Tensor dfc = random_on(ctx, {N, 4 * H}, 4);
  Tensor dx = ctx.empty({N, H});
  report("matmul fwd x[N,768] @ W[768,2304] (qkv)", median_ms(ctx, [&] { ops::matmul(x, false, w_qkv, false, qkv); }),
         2.0 * N * H * 3 * H, 0, 3 * L);  // its dgrad and wgrad: about the same time
  report("matmul fwd x[N,768] @ W[768,3072] (fc)", median_ms(ctx, [&] { ops::matmul(x, false, w_fc, false, fc); }),
         2.0 * N * H * 4 * H, 0, 2 * L);  // fc and the MLP's projection back
  report("matmul dgrad dy[N,3072] @ W^T (fc)", median_ms(ctx, [&] { ops::matmul(dfc, false, w_fc, true, dx); }),
         2.0 * N * H * 4 * H, 0, 2 * L);
  report("matmul wgrad x^T @ dy (fc, beta 1)",
         median_ms(ctx, [&] { ops::matmul(x, true, dfc, false, dw, 1.0f, 1.0f); }), 2.0 * N * H * 4 * H, 0, 2 * L);
  const Tensor wte = random_on(ctx, {V, H}, 5);
  Tensor logits = ctx.empty({N, V});
  report("matmul LM head x @ wte^T [N,50304]", median_ms(ctx, [&] { ops::matmul(x, false, wte, true, logits); }),
         2.0 * N * H * V, 0, 3);

  const Tensor q = random_on(ctx, {B, T, NH, D}, 6), k = random_on(ctx, {B, T, NH, D}, 7),
               v = random_on(ctx, {B, T, NH, D}, 8), dout = random_on(ctx, {B, T, NH, D}, 9);
  Tensor out = ctx.empty({B, T, NH, D}), lse = ctx.empty({B, NH, T});
  Tensor dq = ctx.empty(q.shape()), dk = ctx.empty(k.shape()), dv = ctx.empty(v.shape());
  const double att_flops = 4.0 * B * NH * T * T * D / 2;  // causal: half the QK^T and PV products
  // Both CUDA attention paths; the step total counts the one the backend picks here (the GEMM path).
  for (const char* path : {"flash", "gemm"}) {
    ::setenv("LATTICE_CUDA_ATTENTION", path, 1);
    const int calls = std::string(path) == "gemm" ? L : 0;
    report(("attention forward (" + std::string(path) + ")").c_str(),
           median_ms(ctx, [&] { ops::attention_forward(q, k, v, out, lse); }), att_flops, 0, calls);
    report(("attention backward (" + std::string(path) + ")").c_str(),
           median_ms(ctx, [&] { ops::attention_backward(dout, q, k, v, out, lse, dq, dk, dv); }), 2.5 * att_flops, 0,
           calls);
  }
  ::unsetenv("LATTICE_CUDA_ATTENTION");

  const Tensor gamma = random_on(ctx, {H}, 10), beta = random_on(ctx, {H}, 11), dy = random_on(ctx, {N, H}, 12);
  Tensor y = ctx.empty({N, H}), mean = ctx.empty({N}), rstd = ctx.empty({N}), dgamma = ctx.zeros({H}),
         dbeta = ctx.zeros({H});
  report("layernorm forward", median_ms(ctx, [&] { ops::layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd); }), 0,
         2.0 * N * H * 4, 2 * L + 1);
  report("layernorm backward",
         median_ms(ctx, [&] { ops::layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta); }), 0,
         3.0 * N * H * 4, 2 * L + 1);
  Tensor g = ctx.empty({N, 4 * H});
  report("gelu forward [N,3072]", median_ms(ctx, [&] { ops::gelu_forward(fc, g); }), 0, 2.0 * N * 4 * H * 4, L);
  report("gelu backward", median_ms(ctx, [&] { ops::gelu_backward(dfc, fc, g); }), 0, 3.0 * N * 4 * H * 4, L);
  const Tensor bias = random_on(ctx, {4 * H}, 13);
  report("add_bias [N,3072]", median_ms(ctx, [&] { ops::add_bias(fc, bias); }), 0,
         2.0 * N * 4 * H * 4, 4 * L);
  Tensor db = ctx.zeros({4 * H});
  report("bias_backward [N,3072]", median_ms(ctx, [&] { ops::bias_backward(dfc, db); }), 0, 1.0 * N * 4 * H * 4,
         4 * L);
  Tensor sum = ctx.empty({N, H});
  report("add (residual) [N,768]", median_ms(ctx, [&] { ops::add(x, dy, sum); }), 0, 3.0 * N * H * 4, 4 * L);

  const Tensor tok = ids_on(ctx, N, static_cast<int32_t>(V), 14);
  Tensor emb = ctx.empty({N, H}), dwte = ctx.zeros({V, H});
  report("embedding forward (with its index check)", median_ms(ctx, [&] { ops::embedding_forward(tok, wte, emb); }), 0,
         2.0 * N * H * 4, 1);
  report("embedding backward", median_ms(ctx, [&] { ops::embedding_backward(tok, dy, dwte); }), 0, 2.0 * N * H * 4,
         1);
  Tensor losses = ctx.empty({N}), lse_ce = ctx.empty({N});
  report("cross-entropy forward [N,50304]",
         median_ms(ctx, [&] { ops::cross_entropy_forward(logits, tok, losses, lse_ce); }), 0, 1.0 * N * V * 4, 1);
  report("cross-entropy backward (in place)",
         median_ms(ctx, [&] { ops::cross_entropy_backward(logits, tok, lse_ce, 1.0f / N, logits); }), 0,
         2.0 * N * V * 4, 1);

  const int64_t P = 124'000'000;
  Tensor param = ctx.zeros({P}), grad = random_on(ctx, {P}, 15, -1e-3f, 1e-3f), m = ctx.zeros({P}), v2 = ctx.zeros({P});
  const ops::AdamWParams adam{.lr = 6e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                              .step = 1, .grad_scale = 1.0f};
  report("adamw over 124M parameters", median_ms(ctx, [&] { ops::adamw_update(param, grad, m, v2, adam); }), 0,
         7.0 * P * 4, 1);
  Tensor norm = ctx.zeros({1}, DType::kF64);
  report("sum of squares (grad norm) over 124M", median_ms(ctx, [&] { ops::sum_squares_to(grad, norm, 0); }), 0,
         1.0 * P * 4, 1);
  std::printf("%-44s %57.2f ms per micro-batch of %lld tokens (op sum; the trainer adds launches and syncs)\n",
              "total", total_ms, (long long)N);
  return 0;
}
