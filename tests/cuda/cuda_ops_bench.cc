// Where a GPU training step's time goes: each op of kernels/ops.h timed alone on the GPU at GPT-2
// 124M sizes (micro-batch 8 × seq 1024, hidden 768, 12 heads, vocab 50304), with CUDA events —
// the median of 20 runs after 3 warm-ups, on random data — twice: in f32, and with the bf16
// mixed-precision recipe's dtypes (bf16 weights, activations and their gradients; fp32 weight,
// bias and norm gradients, statistics and optimizer state). Prints milliseconds, achieved TFLOP/s
// for the matmuls and attention, and GB/s (bytes read + written once) for the memory-bound ops; the
// last column multiplies by how often a micro-batch calls the op, so the rows add up to an estimate
// of one micro-batch's forward and backward plus one optimizer step. Each linear layer is timed as
// the model calls it (model/linear.cc: weight [out, in], the bias in the GEMM's epilogue, the weight
// gradient added into fp32 with beta 1, the output projections adding the residual stream in their
// GEMM). f32 attention is timed on both CUDA paths (flash kernel, GEMMs), bf16 attention is cuDNN's
// SDPA (and its non-deterministic backward, outside the total). The GELU MLP's two fused GEMMs
// (training.gelu_fusion) and each linear layer's weight gradient with its bias gradient in one GEMM
// (training.bias_grad_fusion; both "auto" defaults turn them on for bf16 on Hopper) are timed beside
// the unfused ops, outside the total, which stays the unfused ops' for comparison across runs.
//
// Run by tools/gpu/check.sh; not a test (it asserts nothing but that the ops run). `--smoke` runs
// every op once at small sizes, on the CPU and on the CUDA emulator, so the bench's own code is
// checked on machines without a GPU (tests/cuda:cuda_ops_bench_smoke_test).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/adamw_runs.h"
#include "kernels/attention_shape.h"
#include "kernels/backend.h"
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

struct Sizes {
  int64_t batch, seq, hidden, heads, vocab, layers, params;
  int warmups, runs;
  int64_t tokens() const { return batch * seq; }
  int64_t head_dim() const { return hidden / heads; }
};

constexpr Sizes kGpt2{8, 1024, 768, 12, 50304, 12, 124'000'000, 3, 20};
constexpr Sizes kSmoke{1, 64, 768, 12, 50304, 2, 1'000'000, 0, 1};

class Bench {
 public:
  Bench(const DeviceContext& ctx, const Sizes& s, DType act) : ctx_(ctx), s_(s), act_(act) {}

  // Uniform in [lo, hi) in `dtype` (drawn in f32 on the host, then cast on the device).
  Tensor random(const Shape& shape, DType dtype, uint32_t seed, float lo = -1.0f, float hi = 1.0f) const {
    Tensor host = Tensor::empty(shape);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = dist(gen);
    Tensor f32 = ctx_.to_device(host);
    if (dtype == DType::kF32) return f32;
    Tensor typed = ctx_.empty(shape, dtype);
    ops::cast(f32, typed);
    return typed;
  }
  Tensor act(const Shape& shape, uint32_t seed) const { return random(shape, act_, seed); }

  Tensor ids(int64_t n, int32_t vocab, uint32_t seed) const {
    Tensor host = Tensor::empty({n}, DType::kI32);
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
    for (int64_t i = 0; i < n; ++i) host.i32()[i] = dist(gen);
    return ctx_.to_device(host);
  }

  // flops > 0: a compute figure; else bytes: a bandwidth figure. per_step: calls in one micro-batch.
  void time(const std::string& name, const std::function<void()>& op, double flops, double bytes, int64_t per_step) {
    for (int i = 0; i < s_.warmups; ++i) op();
    std::vector<double> ms;
    for (int i = 0; i < s_.runs; ++i) {
      const Event start = ctx_.stream().record();
      op();
      const Event end = ctx_.stream().record();
      ms.push_back(1e3 * end.seconds_since(start));
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    const double rate = flops > 0 ? flops / (median * 1e-3) / 1e12 : bytes / (median * 1e-3) / 1e9;
    total_ms_ += median * static_cast<double>(per_step);
    std::printf("%-50s %8.3f ms  %8.1f %-7s x%-3lld = %8.2f ms\n", name.c_str(), median, rate,
                flops > 0 ? "TFLOP/s" : "GB/s", static_cast<long long>(per_step),
                median * static_cast<double>(per_step));
  }

  // One linear layer of the model, [N, in] -> [N, out], called `calls` times per micro-batch. An
  // output projection (joins_residual) adds the residual stream in its GEMM (ops::matmul_residual, as
  // model/decoder_layer.cc runs it); its plain forward, then the add it replaced, are timed outside
  // the total.
  void linear(const char* name, int64_t in, int64_t out, int64_t calls, uint32_t seed, bool joins_residual = false) {
    const int64_t n = s_.tokens();
    const Tensor x = act({n, in}, seed), w = act({out, in}, seed + 1), bias = act({out}, seed + 2),
                 dy = act({n, out}, seed + 3);
    Tensor y = ctx_.empty({n, out}, act_), dx = ctx_.empty({n, in}, act_), dw = ctx_.zeros({out, in}),
           db = ctx_.zeros({out});
    const double flops = 2.0 * n * in * out;
    const std::string shape = fmt_shape(in, out);
    if (joins_residual) {
      const Tensor residual = act({n, out}, seed + 4);
      time(std::string(name) + " fwd + bias + residual, one GEMM " + shape,
           [&] { ops::matmul_residual(x, false, w, true, bias, residual, y); }, flops, 0, calls);
      time(std::string(name) + " fwd + bias, then add (not in the total)", [&] {
        ops::matmul_bias(x, false, w, true, bias, y);
        ops::add(y, residual, y);
      }, flops, 0, 0);
    } else {
      time(std::string(name) + " fwd + bias " + shape, [&] { ops::matmul_bias(x, false, w, true, bias, y); }, flops,
           0, calls);
    }
    time(std::string(name) + " dgrad", [&] { ops::matmul(dy, false, w, false, dx); }, flops, 0, calls);
    time(std::string(name) + " wgrad (+= into f32)", [&] { ops::matmul(dy, true, x, false, dw, 1.0f, 1.0f); }, flops,
         0, calls);
    time(std::string(name) + " bias_backward", [&] { ops::bias_backward(dy, db); }, 0,
         1.0 * n * out * dtype_size(act_), calls);
    // training.bias_grad_fusion (not in the total; see the header): the wgrad with the bias gradient
    // in its BGRADB epilogue, against "wgrad" + "bias_backward" above.
    const Backend& be = backend_for("cuda_ops_bench", ctx_.device());
    if (be.set_bias_grad_fusion != nullptr) be.set_bias_grad_fusion(true);
    time(std::string(name) + " wgrad + bias gradient, one GEMM (bias_grad_fusion)",
         [&] { ops::linear_weight_grad(dy, x, dw, db); }, flops, 0, 0);
    if (be.set_bias_grad_fusion != nullptr) be.set_bias_grad_fusion(false);
  }

  // The model's q, k and v projections (model/decoder_layer.cc), `calls` times per micro-batch: the
  // forward and the weight gradients each as one batched GEMM (ops::matmul_group over weights and
  // biases laid out as in the flat parameter buffer, outputs side by side), the input gradient as
  // three GEMMs accumulating into one dx, and the three bias gradients in one launch (beside them,
// outside the total, in three).
  void qkv(int64_t calls, uint32_t seed) {
    const int64_t n = s_.tokens(), H = s_.hidden, block = H * H + H;
    const Tensor x = act({n, H}, seed), params = act({3 * block}, seed + 1), dy = act({3, n, H}, seed + 3);
    Tensor y = ctx_.empty({3, n, H}, act_), dx = ctx_.empty({n, H}, act_), grads = ctx_.zeros({3 * block});
    std::vector<Tensor> weights, biases, ys, dys, dws, dbs;
    for (int64_t i = 0; i < 3; ++i) {
      weights.push_back(params.slice_flat(i * block, {H, H}));
      biases.push_back(params.slice_flat(i * block + H * H, {H}));
      ys.push_back(y.slice_flat(i * n * H, {n, H}));
      dys.push_back(dy.slice_flat(i * n * H, {n, H}));
      dws.push_back(grads.slice_flat(i * block, {H, H}));
      dbs.push_back(grads.slice_flat(i * block + H * H, {H}));
    }
    const double flops = 3 * 2.0 * n * H * H;
    const std::string shape = fmt_shape(H, H);
    time("q, k, v fwd + bias, one batched GEMM " + shape,
         [&] { ops::matmul_group({&x, 1}, false, weights, true, biases, ys); }, flops, 0, calls);
    time("q, k, v dgrad (three GEMMs)", [&] {
      for (int i = 0; i < 3; ++i) ops::matmul(dys[i], false, weights[i], false, dx, 1.0f, i == 0 ? 0.0f : 1.0f);
    }, flops, 0, calls);
    time("q, k, v wgrad, one batched GEMM (+= into f32)",
         [&] { ops::matmul_group(dys, true, {&x, 1}, false, {}, dws, 1.0f, 1.0f); }, flops, 0, calls);
    time("q, k, v bias_backward_group (one launch)", [&] { ops::bias_backward_group(dys, dbs); }, 0,
         3.0 * n * H * dtype_size(act_), calls);
    time("q, k, v bias_backward, three launches (not in the total)", [&] {
      for (int i = 0; i < 3; ++i) ops::bias_backward(dys[i], dbs[i]);
    }, 0, 3.0 * n * H * dtype_size(act_), 0);
  }

  void run() {
    const int64_t N = s_.tokens(), H = s_.hidden, V = s_.vocab, L = s_.layers, B = s_.batch, T = s_.seq;
    const int64_t NH = s_.heads, D = s_.head_dim();
    const double a = dtype_size(act_);
    std::printf("-- %s: %lld tokens per micro-batch, hidden %lld, %lld layers, vocab %lld --\n",
                act_ == DType::kBF16 ? "bf16 mixed precision" : "f32", static_cast<long long>(N),
                static_cast<long long>(H), static_cast<long long>(L), static_cast<long long>(V));

    // The model batches q, k and v (model/decoder_layer.cc). Outside the total, for comparison: one
    // of the three GEMMs alone (what the model ran before), and one [H, 3H] GEMM, as llm.c's.
    qkv(L, 1);
    linear("q, k, v one by one (each; not in the total)", H, H, 0, 51);
    linear("qkv as one [H, 3H] GEMM (not in the total)", H, 3 * H, 0, 41);
    linear("attn proj", H, H, L, 11, /*joins_residual=*/true);
    linear("fc", H, 4 * H, L, 21);
    linear("fc proj", 4 * H, H, L, 31, /*joins_residual=*/true);
    Tensor logits = ctx_.empty({N, V}, act_);  // the LM head's, then the loss's input (as in the model)
    {
      const Tensor x = act({N, H}, 41), wte = act({V, H}, 42);
      Tensor dx = ctx_.empty({N, H}, act_), dwte = ctx_.zeros({V, H});
      const double flops = 2.0 * N * H * V;
      time("LM head fwd x @ wte^T [N,50304]", [&] { ops::matmul(x, false, wte, true, logits); }, flops, 0, 1);
      time("LM head dgrad", [&] { ops::matmul(logits, false, wte, false, dx); }, flops, 0, 1);
      time("LM head wgrad (+= into f32)", [&] { ops::matmul(logits, true, x, false, dwte, 1.0f, 1.0f); }, flops, 0, 1);
    }
    {
      const Tensor q = act({B, T, NH, D}, 51), k = act({B, T, NH, D}, 52), v = act({B, T, NH, D}, 53),
                   dout = act({B, T, NH, D}, 54);
      Tensor out = ctx_.empty({B, T, NH, D}, act_), lse = ctx_.empty({B, NH, T});
      Tensor dq = ctx_.empty(q.shape(), act_), dk = ctx_.empty(k.shape(), act_), dv = ctx_.empty(v.shape(), act_);
      const double att_flops = 4.0 * B * NH * T * T * D / 2;  // causal: half the QK^T and PV products
      auto attention = [&](const std::string& path, int64_t calls) {
        time("attention forward (" + path + ")", [&] { ops::attention_forward(q, k, v, out, lse); }, att_flops, 0,
             calls);
        time("attention backward (" + path + ")",
             [&] { ops::attention_backward(dout, q, k, v, out, lse, dq, dk, dv); }, 2.5 * att_flops, 0, calls);
      };
      if (act_ == DType::kBF16) {
        attention("bf16: cuDNN SDPA on a GPU", L);
        if (ctx_.device() == Device::kCuda) {
          // What determinism costs: cuDNN's plain backward sums dQ with atomics (bits may change from run
          // to run), so the model runs the deterministic one above; outside the total.
          const AttentionShape shape{B, T, NH, NH, D};
          time("attention backward (cuDNN, non-deterministic; not in the total)", [&] {
            cuda::cudnn_sdpa_backward(shape, cuda::SdpaDirection::kBackward, dout.bf16(), q.bf16(), k.bf16(), v.bf16(),
                                      out.bf16(), lse.f32(), dq.bf16(), dk.bf16(), dv.bf16());
          }, 2.5 * att_flops, 0, 0);
        }
      } else {
        // Both f32 CUDA paths; the total counts the one the backend picks here (the GEMM path).
        for (const char* path : {"flash", "gemm"}) {
          ::setenv("LATTICE_CUDA_ATTENTION", path, 1);
          attention(path, std::string(path) == "gemm" ? L : 0);
        }
        ::unsetenv("LATTICE_CUDA_ATTENTION");
      }
    }
    {
      const Tensor x = act({N, H}, 61), gamma = act({H}, 62), beta = act({H}, 63), dy = act({N, H}, 64);
      Tensor y = ctx_.empty({N, H}, act_), mean = ctx_.empty({N}), rstd = ctx_.empty({N}),
             dx = ctx_.empty({N, H}, act_), dgamma = ctx_.zeros({H}), dbeta = ctx_.zeros({H});
      time("layernorm forward", [&] { ops::layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd); }, 0,
           2.0 * N * H * a, 2 * L + 1);
      // The decoder's norm backwards add the residual path's gradient in their pass over dx; the final
      // norm's has none. Outside the total, for comparison: the backward, then the add it replaced.
      const Tensor residual_grad = act({N, H}, 65);
      time("layernorm backward + residual gradient", [&] {
        ops::layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, residual_grad);
      }, 0, 4.0 * N * H * a, 2 * L);
      time("layernorm backward (final norm)",
           [&] { ops::layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta); }, 0, 3.0 * N * H * a, 1);
      time("layernorm backward, then add (not in the total)", [&] {
        ops::layernorm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
        ops::add(dx, residual_grad, dx);
      }, 0, 6.0 * N * H * a, 0);
      // The forward's residual adds are in the output projections' GEMMs (linear(), joins_residual).
      Tensor sum = ctx_.empty({N, H}, act_);
      time("add (residual, forward; not in the total) [N,768]", [&] { ops::add(x, dy, sum); }, 0, 3.0 * N * H * a, 0);
    }
    {
      const Tensor fc = act({N, 4 * H}, 71), dfc = act({N, 4 * H}, 72);
      Tensor g = ctx_.empty({N, 4 * H}, act_), dg = ctx_.empty({N, 4 * H}, act_);
      time("gelu forward [N,3072]", [&] { ops::gelu_forward(fc, g); }, 0, 2.0 * N * 4 * H * a, L);
      time("gelu backward", [&] { ops::gelu_backward(dfc, fc, dg); }, 0, 3.0 * N * 4 * H * a, L);
    }
    {
      // training.gelu_fusion (x0: not in the total; see the header): fc's forward with its GELU and
      // fc proj's dgrad with the GELU's backward, each one GEMM with cuBLASLt's epilogue, against
      // "fc fwd + bias" + "gelu forward" and "fc proj dgrad" + "gelu backward" above.
      const Backend& be = backend_for("cuda_ops_bench", ctx_.device());
      if (be.set_gelu_fusion != nullptr) be.set_gelu_fusion(true);
      const Tensor x = act({N, H}, 73), w_fc = act({4 * H, H}, 74), b_fc = act({4 * H}, 75), dy = act({N, H}, 76),
                   w_proj = act({H, 4 * H}, 77);
      Tensor pre = ctx_.empty({N, 4 * H}, act_), out = ctx_.empty({N, 4 * H}, act_), dpre = ctx_.empty({N, 4 * H}, act_);
      const double flops = 2.0 * N * H * 4 * H;
      time("fc fwd + bias + GELU (training.gelu_fusion)",
           [&] { ops::matmul_bias_gelu(x, false, w_fc, true, b_fc, pre, out); }, flops, 0, 0);
      time("fc proj dgrad + GELU backward (gelu_fusion)",
           [&] { ops::matmul_gelu_backward(dy, false, w_proj, false, pre, dpre); }, flops, 0, 0);
      if (be.set_gelu_fusion != nullptr) be.set_gelu_fusion(false);
    }
    {
      const Tensor tok = ids(N, static_cast<int32_t>(V), 81), wte = act({V, H}, 82), wpe = act({T, H}, 83),
                   dy = act({N, H}, 84);
      Tensor emb = ctx_.empty({N, H}, act_), dwte = ctx_.zeros({V, H}), dwpe = ctx_.zeros({T, H});
      // Ids checked on the host as the trainer's micro-batches are (no read-back in the op).
      time("embedding forward", [&] { ops::embedding_forward(tok, wte, emb, ops::Ids::kChecked); }, 0,
           2.0 * N * H * a, 1);
      time("embedding backward (into f32)", [&] { ops::embedding_backward(tok, dy, dwte, ops::Ids::kChecked); }, 0,
           N * H * (a + 8.0), 1);
      time("position embedding forward", [&] { ops::add_position_embedding(emb, wpe, T, 0); }, 0, 3.0 * N * H * a,
           1);
      time("position embedding backward (into f32)", [&] { ops::position_embedding_backward(dy, T, 0, dwpe); }, 0,
           N * H * a + 8.0 * T * H, 1);
    }
    {
      const Tensor tok = ids(N, static_cast<int32_t>(V), 91);
      Tensor losses = ctx_.empty({N}), lse = ctx_.empty({N});
      // Training runs the fused classifier (model/lm_head.cc); the forward alone is evaluation's, and
      // the backward alone the tensor-parallel head's: outside the total.
      time("cross-entropy forward [N,50304] (not in the total)",
           [&] { ops::cross_entropy_forward(logits, tok, losses, lse); }, 0, 1.0 * N * V * a, 0);
      time("cross-entropy backward, in place (not in the total)",
           [&] { ops::cross_entropy_backward(logits, tok, lse, 1.0f / static_cast<float>(N), logits); }, 0,
           2.0 * N * V * a, 0);
      time("cross-entropy fused forward + backward, in place", [&] {
        ops::cross_entropy_forward_backward(logits, tok, 1.0f / static_cast<float>(N), losses, lse, logits);
      }, 0, 2.0 * N * V * a, 1);
    }
    {
      // The optimizer over `params` parameters in runs as the trainer makes them (parallel/optimizer.cc:
      // adjacent parameters with one decay flag merged): GPT-2's order, matrices decayed, vectors not,
      // the layers at the bench's hidden size (smaller where `params` cannot hold them: the smoke),
      // the embeddings the rest.
      const auto layer_numel = [](int64_t h) { return 12 * h * h + 13 * h; };
      int64_t h = H;
      while (h > 64 && L * layer_numel(h) + 2 * h > s_.params) h -= 64;
      std::vector<AdamWRun> runs;
      int64_t P = 0;
      const auto add = [&](int64_t numel, bool decay) {
        if (!runs.empty() && runs.back().decay == decay) {
          runs.back().numel += numel;
        } else {
          runs.push_back({P, numel, decay});
        }
        P += numel;
      };
      add(std::max(s_.params - L * layer_numel(h) - 2 * h, h), true);  // wte, wpe
      for (int64_t l = 0; l < L; ++l) {
        add(2 * h, false);  // ln_1
        for (int i = 0; i < 4; ++i) {  // q, k, v, o: weight and bias
          add(h * h, true);
          add(h, false);
        }
        add(2 * h, false);  // ln_2
        add(4 * h * h, true);
        add(4 * h, false);
        add(4 * h * h, true);
        add(h, false);
      }
      add(2 * h, false);  // ln_f
      Tensor param = ctx_.zeros({P}), grad = random({P}, DType::kF32, 101, -1e-3f, 1e-3f), m = ctx_.zeros({P}),
             v2 = ctx_.zeros({P});
      const AdamWHyper hyper{0.9, 0.95, 1e-8, 0.1};
      const std::string count = (P >= 1'000'000 ? std::to_string(P / 1'000'000) + "M" : std::to_string(P)) +
                                " parameters, " + std::to_string(runs.size()) + " runs";
      const bool bf16 = act_ == DType::kBF16;
      Tensor copies = bf16 ? ctx_.empty({P}, DType::kBF16) : Tensor{};
      // What the trainer runs: every run in a few launches, bf16 parameters written in the same pass.
      time(std::string("adamw_update_runs over ") + count + (bf16 ? " (fp32, bf16 copy)" : " (fp32)"),
           [&] { adamw_update_runs(param, grad, m, v2, runs, hyper, 6e-4, 1, 1.0f, copies); }, 0,
           (bf16 ? 30.0 : 28.0) * P, 1);
      // Before: one launch a run, then the cast.
      time("  adamw, one launch a run (not in the total)", [&] {
        for (const AdamWRun& r : runs) {
          Tensor p = param.slice_flat(r.offset, {r.numel}), g = grad.slice_flat(r.offset, {r.numel});
          Tensor mr = m.slice_flat(r.offset, {r.numel}), vr = v2.slice_flat(r.offset, {r.numel});
          ops::adamw_update(p, g, mr, vr,
                            {.lr = 6e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                             .weight_decay = r.decay ? 0.1f : 0.0f, .step = 1, .grad_scale = 1.0f});
        }
      }, 0, 28.0 * P, 0);
      if (bf16) {
        time("  then the cast to the bf16 copies (not in the total)", [&] { ops::cast(param, copies); }, 0, 6.0 * P,
             0);
      }
      Tensor norm = ctx_.zeros({1}, DType::kF64);
      time("sum of squares (grad norm) over " + count, [&] { ops::sum_squares_to(grad, norm, 0); }, 0, 1.0 * P * 4,
           1);
    }
    std::printf("%-50s %57.2f ms per micro-batch of %lld tokens (op sum; the trainer adds launches and syncs)\n",
                "total", total_ms_, static_cast<long long>(N));
  }

  double total_ms() const { return total_ms_; }

 private:
  static std::string fmt_shape(int64_t in, int64_t out) {
    return "[N," + std::to_string(in) + "]x[" + std::to_string(in) + "," + std::to_string(out) + "]";
  }

  const DeviceContext& ctx_;
  Sizes s_;
  DType act_;
  double total_ms_ = 0;
};

}  // namespace
}  // namespace lattice

int main(int argc, char** argv) {
  using namespace lattice;
  // --smoke [cpu|cuda]: every op once at small sizes, on the CPU backend or on a CUDA backend (the
  // build machines link the CPU emulator's, tests/cuda_emu), so the bench's own code is checked there.
  const bool smoke = argc >= 2 && std::strcmp(argv[1], "--smoke") == 0;
  const bool smoke_cuda = smoke && argc == 3 && std::strcmp(argv[2], "cuda") == 0;
  if ((argc > 1 && !smoke) || (smoke && argc == 3 && !smoke_cuda && std::strcmp(argv[2], "cpu") != 0) || argc > 3) {
    std::fprintf(stderr, "usage: %s [--smoke [cpu|cuda]]  (--smoke: every op once at small sizes)\n", argv[0]);
    return 2;
  }
  try {
    const DeviceContext ctx(smoke && !smoke_cuda ? Device::kCpu : Device::kCuda);
    const Sizes& sizes = smoke ? kSmoke : kGpt2;
    Bench f32(ctx, sizes, DType::kF32);
    f32.run();
    Bench bf16(ctx, sizes, DType::kBF16);
    bf16.run();
    std::printf("bf16 / f32 op sum: %.3f\n", bf16.total_ms() / f32.total_ms());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_ops_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
