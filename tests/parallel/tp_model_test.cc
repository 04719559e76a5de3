// Tensor (and sequence) parallelism inside the model, under mpirun -np 2 and -np 4 with tp = the
// world size: a tiny GPT-2 (tied, biases, LayerNorm, learned positions) and a tiny Llama (GQA
// 8/4 heads, RoPE, RMSNorm, SwiGLU, untied, no bias), with and without sequence parallelism, must
// match a one-process model built in the same binary:
//   (a) every rank's initialized box is the one-process box bit for bit, padding is zero;
//   (b) the loss of every token of a few micro-batches matches within 1e-5 relative;
//   (c) after backward every gradient box matches (tolerance below), padding gradients are
//       exactly zero — the gradients completed as the trainer completes them: the chunk's
//       grads-done hook hands them to GradSync on the last micro-batch (under sequence parallelism
//       the tp-duplicated ones are summed over tp there) and GradSync::finish() waits;
//   (d) a few SGD steps keep losses and weights equal.
// Vocabularies of 300 and 200 tokens give full, partial and (at tp 4) empty vocabulary boxes.
//
// Gradient tolerance: |g_tp - g_1| <= 1e-4 · max|g_1| + 1e-6 · (max |g_1| over the model), per
// tensor box. Both sides are fp32 sums of the same products in different orders (K split over tp
// in row-parallel layers and the head, partial sums over tokens under SP, per-shard softmax
// sums); a sum of K terms carries ~sqrt(K)·6e-8 relative rounding of its largest terms, and the
// error passes through ~2 layers of backward, so differences around 1e-6 of a tensor's scale are
// expected (measured: at most 1.2e-6 at tp 4). The model-scale floor covers tensors whose exact gradient is 0
// (k_proj.bias: softmax ignores a shift shared by a row's scores), where both sides hold rounding
// noise of ~1e-8 of the model scale. A missing collective, a wrong shard or a double-counted
// gradient changes entries by O(scale), >= 1e3 times the bound. Weights after 3 SGD steps:
// 1e-5 of the tensor's scale + 1e-7 of the model's (lr · the gradient differences above).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "model/model_chunk.h"
#include "model/model_parameters.h"
#include "model/transformer.h"
#include "parallel/grad_sync.h"
#include "parallel/trace.h"
#include "tests/parallel/mpi_test_main.h"
#include "tests/tiny_models.h"

namespace lattice {
namespace {

using testing::world;

constexpr int64_t kBatch = 2;
constexpr uint64_t kSeed = 1234;

ModelConfig tp_gpt2() {
  ModelConfig c = testing::tiny_gpt2();
  c.vocab_size = 300;  // tp 2: boxes 256 + 44 rows of 256; tp 4: 128, 128, 44, 0 of 128
  c.seq_length = 8;
  c.init_std = 0.2;  // O(1) activations, so every term of the math matters
  return c;
}

ModelConfig tp_llama() {
  ModelConfig c = testing::tiny_llama();
  c.hidden_size = 32;
  c.num_attention_heads = 8;
  c.num_kv_heads = 4;
  c.vocab_size = 200;  // tp 2: 128, 72; tp 4: 128, 72, 0, 0
  c.seq_length = 8;
  c.init_std = 0.2;
  return c;
}

struct Batch {
  Tensor ids, targets;
};

// The same micro-batches on every rank (tp ranks all see the whole batch).
Batch make_batch(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size - 1));
  Batch b{Tensor::empty({kBatch, c.seq_length}, DType::kI32), Tensor::empty({kBatch, c.seq_length}, DType::kI32)};
  for (int64_t i = 0; i < b.ids.numel(); ++i) {
    b.ids.i32()[i] = token(rng);
    b.targets.i32()[i] = token(rng);
  }
  return b;
}

// The one-process model and this rank's tensor-parallel one, initialized from the same seed.
struct Models {
  ModelConfig config;
  ModelLayout layout;
  TensorParallel tp;
  ParameterStore ref;
  Transformer ref_model;
  ParameterStore params;
  ModelChunk chunk;
  Tracer tracer;
  GradSync grad_sync;  // the trainer's tp sum of the tp-duplicated gradients under SP
  bool last_micro_batch = false;
  Tensor none;

  Models(const ModelConfig& c, bool sp)
      : config(c),
        layout(make_layout(sp)),
        tp{&world(), sp},
        ref(model_parameter_specs(c), host_context()),
        ref_model(c, ref, kBatch),
        params(model_parameter_specs(c, layout), host_context()),
        chunk(c, layout, 0, params, tp, kBatch, 1),
        tracer("", world().rank()),
        grad_sync(params, world(), sp, nullptr, c.tie_embeddings, nullptr, tracer) {
    ref.initialize(kSeed);
    params.initialize(kSeed);
    // As ChunkStage does: gradients are final on the step's last micro-batch.
    chunk.set_grads_done_hook([this](const std::vector<size_t>& indices) {
      if (last_micro_batch) grad_sync.grads_done(indices);
    });
  }

  static ModelLayout make_layout(bool sp) {
    ModelLayout l;
    l.tp_rank = world().rank();
    l.tp_size = world().size();
    l.sequence_parallel = sp;
    return l;
  }

  // Forward + backward of one micro-batch on both models; returns the token losses (ref, tp).
  std::pair<Tensor, Tensor> step(const Batch& b, float grad_scale, bool last) {
    last_micro_batch = last;
    Tensor ref_losses = Tensor::empty({kBatch * config.seq_length});
    Tensor tp_losses = Tensor::empty({kBatch * config.seq_length});
    ref_model.forward(b.ids, b.targets, ref_losses);
    ref_model.backward(b.ids, b.targets, grad_scale);
    chunk.forward(0, b.ids, b.targets, none, none, tp_losses);
    chunk.backward(0, b.ids, b.targets, none, grad_scale, none);
    return {ref_losses, tp_losses};
  }
};

// How far this rank's box of a local tensor is from the same box of the one-process tensor.
struct BoxDiff {
  double max_diff = 0.0;     // over the box
  double max_ref = 0.0;      // max |reference| over the WHOLE global tensor (its scale)
  double max_padding = 0.0;  // max |local| past the box
};

BoxDiff box_diff(const ParamSpec& s, const Tensor& local, const Tensor& global) {
  REQUIRE(s.shape.size() <= 2);
  const int64_t rows = s.shape.empty() ? 1 : s.shape[0];
  const int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
  const int64_t gcols = s.global_shape.size() == 2 ? s.global_shape[1] : 1;
  const int64_t box_rows = s.box.empty() ? 1 : s.box[0];
  const int64_t r0 = s.offset.empty() ? 0 : s.offset[0], c0 = s.offset.size() == 2 ? s.offset[1] : 0;
  BoxDiff d;
  for (int64_t i = 0; i < global.numel(); ++i) d.max_ref = std::max(d.max_ref, std::abs(static_cast<double>(global.f32()[i])));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double v = local.f32()[r * cols + c];
      if (r < box_rows) {
        d.max_diff = std::max(d.max_diff, std::abs(v - global.f32()[(r0 + r) * gcols + c0 + c]));
      } else {
        d.max_padding = std::max(d.max_padding, std::abs(v));
      }
    }
  }
  return d;
}

// Largest |entry| over all of the one-process model's values (or gradients).
double model_scale(ParameterStore& ref, bool grads) {
  double m = 0.0;
  const Tensor& flat = grads ? ref.flat_grads() : ref.flat_values();
  for (int64_t i = 0; i < flat.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(flat.f32()[i])));
  return m;
}

// Every box within rel_tol of its tensor's scale, plus floor × the model's scale for tensors whose
// true value is ~0 (the k_proj bias gradient is exactly 0 in exact arithmetic — softmax ignores a
// shift shared by a row's scores — so both sides hold rounding noise there).
double check_equal(Models& m, bool grads, double rel_tol, double floor) {
  const double model = model_scale(m.ref, grads);
  double worst = 0.0;
  for (size_t i = 0; i < m.params.count(); ++i) {
    const ParamSpec& s = m.params.spec(i);
    const BoxDiff d = box_diff(s, grads ? m.params.grad(i) : m.params.value(i),
                               grads ? m.ref.grad(s.name) : m.ref.value(s.name));
    INFO("rank " << world().rank() << (grads ? " grad of " : " value of ") << s.name << ": max |tp - 1| = "
                 << d.max_diff << ", tensor scale " << d.max_ref << ", model scale " << model);
    CHECK(d.max_diff <= rel_tol * d.max_ref + floor * model);
    CHECK(d.max_padding == 0.0);  // padding values and gradients stay exactly zero
    if (grads) CHECK(d.max_ref > 0.0);  // every gradient is exercised
    if (d.max_ref > 1e-3 * model) worst = std::max(worst, d.max_diff / d.max_ref);
  }
  return worst;
}

void check_losses_equal(const Tensor& ref, const Tensor& tp) {
  REQUIRE(ref.numel() == tp.numel());
  for (int64_t i = 0; i < ref.numel(); ++i) {
    INFO("rank " << world().rank() << " token " << i);
    CHECK(tp.f32()[i] == Approx(ref.f32()[i]).epsilon(1e-5));
  }
}

void run_case(const ModelConfig& c, bool sp) {
  Models m(c, sp);
  const int64_t tokens = kBatch * c.seq_length;

  // (a) Initialization: the same boxes bit for bit, zero padding.
  check_equal(m, /*grads=*/false, 0.0, 0.0);

  // (b), (c): three accumulated micro-batches.
  m.ref.zero_grads();
  m.params.zero_grads();
  const int micro_batches = 3;
  const float scale = 1.0f / static_cast<float>(tokens * micro_batches);
  for (int mb = 0; mb < micro_batches; ++mb) {
    auto [ref_losses, tp_losses] = m.step(make_batch(c, 100 + mb), scale, mb == micro_batches - 1);
    check_losses_equal(ref_losses, tp_losses);
  }
  m.grad_sync.finish();
  const double worst = check_equal(m, /*grads=*/true, 1e-4, 1e-6);
  if (world().rank() == 0) {
    std::printf("%s tp %d sp %d: worst gradient difference %.2e of its tensor's scale (tensors above 1e-3 of the "
                "model's gradient scale)\n",
                c.arch == Arch::kGpt2 ? "gpt2" : "llama", world().size(), sp ? 1 : 0, worst);
  }

  // (d) SGD steps: w -= lr · g on both; losses and weights stay equal.
  const float lr = 0.5f;
  for (int step = 0; step < 3; ++step) {
    ops::axpy(-lr, m.ref.flat_grads(), m.ref.flat_values());
    ops::axpy(-lr, m.params.flat_grads(), m.params.flat_values());
    m.ref.zero_grads();
    m.params.zero_grads();
    for (int mb = 0; mb < 2; ++mb) {
      auto [ref_losses, tp_losses] = m.step(make_batch(c, 200 + 10 * step + mb), 1.0f / (2.0f * tokens), mb == 1);
      check_losses_equal(ref_losses, tp_losses);
    }
    m.grad_sync.finish();
    check_equal(m, /*grads=*/true, 1e-4, 1e-6);
  }
  check_equal(m, /*grads=*/false, 1e-5, 1e-7);
}

TEST_CASE("tensor-parallel GPT-2 (tied, biases, LayerNorm, learned positions) matches one process") {
  run_case(tp_gpt2(), false);
}

TEST_CASE("tensor + sequence-parallel GPT-2 matches one process") { run_case(tp_gpt2(), true); }

TEST_CASE("tensor-parallel Llama (GQA, RoPE, RMSNorm, SwiGLU, untied) matches one process") {
  run_case(tp_llama(), false);
}

TEST_CASE("tensor + sequence-parallel Llama matches one process") { run_case(tp_llama(), true); }

TEST_CASE("GradSync sums exactly the tp-duplicated gradients over tp under sequence parallelism") {
  ModelLayout layout = Models::make_layout(true);
  Tracer tracer("", world().rank());
  for (const bool sp : {true, false}) {
    ParameterStore params(model_parameter_specs(tp_gpt2(), layout), host_context());
    GradSync sync(params, world(), sp, nullptr, true, nullptr, tracer);
    std::vector<size_t> all;
    for (size_t i = 0; i < params.count(); ++i) {
      ops::fill(params.grad(i), 1.0f + static_cast<float>(i));
      all.push_back(params.count() - 1 - i);  // backward order
    }
    sync.grads_done(all);
    sync.finish();
    const float tp = static_cast<float>(world().size());
    int duplicated = 0;
    for (size_t i = 0; i < params.count(); ++i) {
      const bool summed = sp && params.spec(i).tp_duplicated;
      const float want = (1.0f + static_cast<float>(i)) * (summed ? tp : 1.0f);
      duplicated += params.spec(i).tp_duplicated ? 1 : 0;
      INFO(params.spec(i).name << (sp ? " with" : " without") << " sequence parallelism");
      CHECK(params.grad(i).f32()[0] == want);
      CHECK(params.grad(i).f32()[params.grad(i).numel() - 1] == want);
    }
    // position embeddings, final norm (2) and per layer 2 norms (4) + o_proj/down_proj biases.
    CHECK(duplicated == 1 + 2 + 2 * (4 + 2));
  }
}

}  // namespace
}  // namespace lattice
