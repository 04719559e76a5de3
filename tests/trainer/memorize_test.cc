// Known answer for the whole training path (model + AdamW + clipping): a tiny model memorizes
// one fixed batch, driving the loss from ln(vocab) to nearly zero.
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "kernels/ops.h"

#include "model/model_parameters.h"
#include "model/transformer.h"
#include "tests/tiny_models.h"
#include "trainer/optimizer.h"
#include "trainer/step_readback.h"

using namespace lattice;

namespace {

double memorize(ModelConfig c) {
  const int64_t B = 2;
  ParameterStore params(model_parameter_specs(c), host_context());
  params.initialize(42);
  Transformer model(c, params, B);
  OptimizerConfig oc;
  oc.lr = 3e-3;
  oc.weight_decay = 0.0;
  Optimizer optimizer(params, optimizer_options(oc));

  Tensor ids = Tensor::empty({B, c.seq_length}, DType::kI32);
  Tensor targets = Tensor::empty({B, c.seq_length}, DType::kI32);
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size - 1));
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.i32()[i] = token(rng);
    targets.i32()[i] = token(rng);  // random targets: only memorization can fit them
  }
  Tensor losses = Tensor::empty({ids.numel()});
  StepReadback readback(host_context(), 1, 0);  // the parameters' device
  double loss = 0;
  for (int step = 1; step <= 200; ++step) {
    params.zero_grads();
    model.forward(ids, targets, losses);
    model.backward(ids, targets, 1.0f / static_cast<float>(ids.numel()));
    readback.enqueue_loss_sum(0, losses);
    readback.read();
    loss = readback.loss_sum(0) / static_cast<double>(losses.numel());
    if (step == 1) CHECK(loss == Approx(std::log(static_cast<double>(c.vocab_size))).epsilon(0.02));
    optimizer.step(oc.lr, clip_scale(std::sqrt(ops::sum_squares(params.flat_grads())), 1.0));
  }
  return loss;
}

// Wider than the gradient-check models so that memorizing 16 random targets is easy.
ModelConfig memorizable(ModelConfig c) {
  c.hidden_size = 32;
  c.ffn_hidden_size = 64;
  c.vocab_size = 50;
  c.seq_length = 8;
  return c;
}

}  // namespace

TEST_CASE("a tiny GPT-2-style model memorizes a fixed batch") {
  CHECK(memorize(memorizable(lattice::testing::tiny_gpt2())) < 0.05);
}

TEST_CASE("a tiny Llama-style model memorizes a fixed batch") {
  CHECK(memorize(memorizable(lattice::testing::tiny_llama())) < 0.05);
}
