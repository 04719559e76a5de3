// Whole-model checks: analytic gradients of tiny GPT-2- and Llama-style models against central
// finite differences, and the loss at init against ln(vocab).
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "model/model_parameters.h"
#include "model/transformer.h"
#include "tests/tiny_models.h"

using namespace lattice;
using lattice::testing::tiny_gpt2;
using lattice::testing::tiny_llama;

namespace {

ModelConfig gradient_check_config(ModelConfig c) {
  c.init_std = 0.3;  // large enough that every gradient is far above fp32 finite-difference noise
  return c;
}

struct Batch {
  Tensor ids, targets;
};

Batch random_batch(const ModelConfig& c, int64_t B, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size - 1));
  Batch b{Tensor::empty({B, c.seq_length}, DType::kI32), Tensor::empty({B, c.seq_length}, DType::kI32)};
  for (int64_t i = 0; i < b.ids.numel(); ++i) {
    b.ids.i32()[i] = token(rng);
    b.targets.i32()[i] = token(rng);
  }
  return b;
}

double mean(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.f32()[i];
  return s / t.numel();
}

// For each parameter tensor: a random direction d restricted to it; the directional derivative
// <grad, d> must match (L(p + h d) - L(p - h d)) / 2h. This checks every tensor's gradient
// (a wrong sign, factor or missing term in any one shows up in its row) while staying fast.
void check_gradients(const ModelConfig& c) {
  const int64_t B = 2;
  ParameterStore params(model_parameter_specs(c), host_context());
  params.initialize(7);
  // Norm gains/biases start at 1/0; perturb them so their gradients are generic.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < params.count(); ++i) {
    if (params.spec(i).init == InitKind::kNormal) continue;
    Tensor& v = params.value(i);
    for (int64_t j = 0; j < v.numel(); ++j) v.f32()[j] += 0.3f * normal(rng);
  }
  Transformer model(c, params, B);
  Batch batch = random_batch(c, B, 3);
  Tensor losses = Tensor::empty({B * c.seq_length});
  const float scale = 1.0f / static_cast<float>(losses.numel());

  params.zero_grads();
  model.forward(batch.ids, batch.targets, losses);
  model.backward(batch.ids, batch.targets, scale);

  auto loss_at = [&]() {
    model.forward(batch.ids, batch.targets, losses);
    return mean(losses);
  };
  const float h = 1e-2f;
  for (size_t i = 0; i < params.count(); ++i) {
    Tensor& v = params.value(i);
    const Tensor& g = params.grad(i);
    std::vector<float> d(v.numel());
    double analytic = 0;
    for (int64_t j = 0; j < v.numel(); ++j) {
      d[j] = normal(rng);
      analytic += static_cast<double>(g.f32()[j]) * d[j];
    }
    std::vector<float> original(v.f32(), v.f32() + v.numel());
    for (int64_t j = 0; j < v.numel(); ++j) v.f32()[j] = original[j] + h * d[j];
    const double plus = loss_at();
    for (int64_t j = 0; j < v.numel(); ++j) v.f32()[j] = original[j] - h * d[j];
    const double minus = loss_at();
    std::copy(original.begin(), original.end(), v.f32());
    const double numeric = (plus - minus) / (2.0 * h);
    INFO(params.spec(i).name << ": analytic " << analytic << " numeric " << numeric);
    // Central differences have O(h^2) truncation error; fp32 rounding of a loss near 2.4 adds
    // about 1e-7 * 2.4 / h. 2% relative (or 2e-4 absolute for near-zero derivatives) is far
    // below what any wrong term produces and comfortably above that noise.
    CHECK(std::abs(analytic - numeric) <= 2e-2 * std::abs(numeric) + 2e-4);
  }
}

}  // namespace

TEST_CASE("GPT-2-style model: gradients match finite differences") { check_gradients(gradient_check_config(tiny_gpt2())); }

TEST_CASE("Llama-style model (GQA, RoPE, SwiGLU, untied): gradients match finite differences") {
  check_gradients(gradient_check_config(tiny_llama()));
}

TEST_CASE("loss at init is close to ln(vocab)") {
  for (ModelConfig c : {tiny_gpt2(), tiny_llama()}) {
    c.vocab_size = 97;
    c.init_std = 0.02;  // logits near zero: the predicted distribution is nearly uniform
    ParameterStore params(model_parameter_specs(c), host_context());
    params.initialize(1);
    Transformer model(c, params, 4);
    Batch batch = random_batch(c, 4, 5);
    Tensor losses = Tensor::empty({4 * c.seq_length});
    model.forward(batch.ids, batch.targets, losses);
    CHECK(mean(losses) == Approx(std::log(97.0)).epsilon(0.01));
  }
}
