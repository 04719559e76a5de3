// Sampling and generation: greedy is the argmax, top-k 1 is greedy, a seed fixes the draws, the
// frequencies follow the softmax; TextGenerator's greedy tokens equal the argmax found
// independently through the model's losses (the target with the smallest loss has the largest
// logit), including contexts longer than model.seq_length (the sliding window).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "model/model_parameters.h"
#include "model/transformer.h"
#include "tests/tiny_models.h"
#include "trainer/sampling.h"
#include "trainer/text_generator.h"

using namespace lattice;

TEST_CASE("temperature 0 and top-k 1 pick the largest logit, the lowest index on ties") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  std::mt19937_64 rng(7);
  CHECK(sample_token(logits, 0.0, 0, rng) == 1);
  for (int i = 0; i < 100; ++i) CHECK(sample_token(logits, 1.0, 1, rng) == 1);
  for (int i = 0; i < 100; ++i) CHECK(sample_token(logits, 5.0, 1, rng) == 1);
}

TEST_CASE("a seed fixes the draws; top-k keeps the k largest; frequencies follow the softmax") {
  const std::vector<float> logits = {std::log(3.0f), 0.0f, -20.0f, -30.0f};
  auto draws = [&](uint64_t seed, int64_t top_k) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 4000; ++i) out.push_back(sample_token(logits, 1.0, top_k, rng));
    return out;
  };
  const std::vector<int32_t> a = draws(3, 0);
  CHECK(a == draws(3, 0));
  CHECK(a != draws(4, 0));
  const double share0 = static_cast<double>(std::count(a.begin(), a.end(), 0)) / static_cast<double>(a.size());
  CHECK(share0 == Approx(0.75).margin(0.03));  // softmax(ln 3, 0) = (0.75, 0.25)
  const std::vector<int32_t> k2 = draws(5, 2);
  CHECK(std::all_of(k2.begin(), k2.end(), [](int32_t t) { return t == 0 || t == 1; }));
  // Temperature 2 flattens: softmax(ln 3 / 2, 0) = sqrt(3) / (sqrt(3) + 1) ≈ 0.634.
  std::mt19937_64 rng(6);
  int zeros = 0;
  for (int i = 0; i < 4000; ++i) zeros += sample_token(logits, 2.0, 2, rng) == 0;
  CHECK(zeros / 4000.0 == Approx(std::sqrt(3.0) / (std::sqrt(3.0) + 1)).margin(0.03));
}

namespace {

// The next greedy token without reading logits: the target whose token loss at the last window
// position is smallest.
int32_t argmax_by_losses(Transformer& model, const std::vector<int32_t>& context) {
  const int64_t T = model.config().seq_length, V = model.config().vocab_size;
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(context.size()), T);
  Tensor ids = Tensor::zeros({1, T}, DType::kI32), targets = Tensor::zeros({1, T}, DType::kI32);
  Tensor losses = Tensor::empty({T});
  std::copy(context.end() - n, context.end(), ids.i32());
  int32_t best = -1;
  float best_loss = INFINITY;
  for (int32_t v = 0; v < V; ++v) {
    targets.i32()[n - 1] = v;
    model.forward(ids, targets, losses);
    if (losses.f32()[n - 1] < best_loss) {
      best_loss = losses.f32()[n - 1];
      best = v;
    }
  }
  return best;
}

void check_greedy(ModelConfig c) {
  c.init_std = 0.5;  // spread the logits of a random model far apart
  c.seq_length = 6;
  ParameterStore params(model_parameter_specs(c), host_context());
  params.initialize(11);
  TextGenerator generator(c, params);
  Transformer reference(c, params, 1);
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 12;  // the context outgrows seq_length 6: the window slides
  const std::vector<int32_t> prompt = {3, 1, 4};
  const std::vector<int32_t> got = generator.generate(prompt, greedy, c.vocab_size, -1);
  std::vector<int32_t> context = prompt, want;
  while (want.size() < 12) {
    want.push_back(argmax_by_losses(reference, context));
    context.push_back(want.back());
  }
  CHECK(got == want);
  // top-k 1 at any temperature and seed is greedy too.
  SamplingOptions top1 = greedy;
  top1.temperature = 1.5;
  top1.top_k = 1;
  top1.seed = 99;
  CHECK(generator.generate(prompt, top1, c.vocab_size, -1) == want);
  // Generation stops after the stop id, which is returned.
  const int32_t stop = want[2];
  const auto first_stop = std::find(want.begin(), want.end(), stop);
  CHECK(generator.generate(prompt, greedy, c.vocab_size, stop) == std::vector<int32_t>(want.begin(), first_stop + 1));
}

}  // namespace

TEST_CASE("greedy generation equals the argmax found through the losses (GPT-2 and Llama)") {
  check_greedy(lattice::testing::tiny_gpt2());
  check_greedy(lattice::testing::tiny_llama());
}

TEST_CASE("a seed gives the same sampled tokens; only ids below the sampling vocabulary are drawn") {
  ModelConfig c = lattice::testing::tiny_gpt2();
  c.init_std = 0.5;
  ParameterStore params(model_parameter_specs(c), host_context());
  params.initialize(5);
  TextGenerator generator(c, params);
  SamplingOptions o;
  o.max_new_tokens = 20;
  o.seed = 42;
  const std::vector<int32_t> a = generator.generate({1, 2}, o, 7, -1);
  CHECK(a == generator.generate({1, 2}, o, 7, -1));
  CHECK(a.size() == 20);
  CHECK(std::all_of(a.begin(), a.end(), [](int32_t t) { return t >= 0 && t < 7; }));
}
