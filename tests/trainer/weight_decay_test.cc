// Weight decay where the real model builder puts it: on embedding tables and linear weight
// matrices, never on biases or norm gains — for GPT-2 and Llama, tied and untied, tp 1 and 2 and
// the last pipeline stage (the tied head's replica) — and one AdamW step with weight decay and zero
// gradients that moves every matrix by exactly the decay and leaves every bias and gain unchanged.
// The expectation is written from the parameter names (model/model_parameters.h's list), not read
// from the builder's own flags.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "parallel/grid.h"
#include "tests/tiny_models.h"
#include "trainer/config.h"
#include "trainer/model_builder.h"
#include "trainer/optimizer.h"

using namespace lattice;

namespace {

// Matrices: the word/position embedding tables, the LM head and every *_proj.weight. Biases and
// the gains of input_norm, post_attention_norm and final_norm are not decayed (Megatron, GPT-2).
bool should_decay(const std::string& name) {
  if (name.ends_with(".bias")) return false;
  if (name.ends_with("norm.weight")) return false;
  return name == "embedding.word_embeddings.weight" || name == "embedding.position_embeddings.weight" ||
         name == "lm_head.weight" || name.ends_with("_proj.weight");
}

struct Case {
  const char* label;
  ModelConfig model;
};

std::vector<Case> models() {
  ModelConfig gpt2_untied = testing::tiny_gpt2();
  gpt2_untied.tie_embeddings = false;
  ModelConfig llama_tied = testing::tiny_llama();
  llama_tied.tie_embeddings = true;
  return {{"gpt2 tied", testing::tiny_gpt2()},
          {"gpt2 untied", gpt2_untied},
          {"llama untied", testing::tiny_llama()},
          {"llama tied", llama_tied}};
}

Config config_for(const ModelConfig& model, int tp, int pp) {
  Config c;
  c.model = model;
  c.parallel.tensor = tp;
  c.parallel.pipeline = pp;
  c.parallel.data = 1;
  return c;
}

}  // namespace

TEST_CASE("the model builder decays embedding and linear weight matrices only") {
  for (const Case& m : models()) {
    for (const auto& [tp, pp] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
      const Config c = config_for(m.model, tp, pp);
      for (int rank = 0; rank < tp * pp; ++rank) {
        const RankGrid grid(tp * pp, rank, tp, pp, 1);
        const auto params = rank_parameters(c, model_layout(c, grid, grid.coords()), host_context());
        int decayed = 0, kept = 0;
        for (const ParamSpec& s : params->specs()) {
          INFO(m.label << ", tp " << tp << ", pp " << pp << ", rank " << rank << ": " << s.name);
          CHECK(s.weight_decay == should_decay(s.name));
          (s.weight_decay ? decayed : kept) += 1;
        }
        // Every rank holds both kinds (norms on every stage), so the check above saw each.
        CHECK(decayed > 0);
        CHECK(kept > 0);
      }
    }
  }
}

TEST_CASE("an AdamW step with weight decay and zero gradients changes matrices only") {
  for (const Case& m : models()) {
    INFO(m.label);
    Config c = config_for(m.model, 1, 1);
    c.optimizer.weight_decay = 0.1;
    const auto params = build_parameters(c, host_context());
    // Non-zero values everywhere: zero-initialised biases would hide a decay (0 · (1 - lr·wd) = 0).
    float* values = params->flat_values().f32();
    for (int64_t i = 0; i < params->numel(); ++i) values[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
    std::vector<float> before(values, values + params->numel());
    params->zero_grads();
    Optimizer optimizer(*params, optimizer_options(c.optimizer));
    const double lr = 0.5;
    optimizer.step(lr, 1.0f);  // zero gradients: the Adam term is 0 / (0 + eps) = 0
    for (size_t p = 0; p < params->count(); ++p) {
      const ParamSpec& s = params->spec(p);
      INFO(s.name);
      const float factor = should_decay(s.name) ? static_cast<float>(1.0 - lr * c.optimizer.weight_decay) : 1.0f;
      const int64_t first = params->value(p).f32() - values, n = params->value(p).numel();
      for (int64_t i = first; i < first + n; ++i) {
        if (factor == 1.0f) {
          REQUIRE(values[i] == before[i]);  // bit for bit
        } else {
          REQUIRE(values[i] == Approx(before[i] * factor).epsilon(1e-6));
        }
      }
    }
  }
}
