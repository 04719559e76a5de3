// Tensor-parallel parameter specs without MPI: local/global shapes, offsets and boxes of the
// column-, row- and vocab-parallel and duplicated parameters, the tiling of every global tensor
// by the tp ranks' boxes, and the InputError for head counts that tp does not divide.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "kernels/error.h"
#include "model/model_parameters.h"
#include "tests/tiny_models.h"

using namespace lattice;

namespace {

ModelLayout tp_layout(int rank, int size) {
  ModelLayout l;
  l.tp_rank = rank;
  l.tp_size = size;
  return l;
}

const ParamSpec& find(const std::vector<ParamSpec>& specs, const std::string& name) {
  for (const ParamSpec& s : specs)
    if (s.name == name) return s;
  FAIL("no parameter " << name);
  return specs.front();
}

}  // namespace

TEST_CASE("tp 2 shards GPT-2 Megatron-style") {
  const ModelConfig c = lattice::testing::tiny_gpt2();  // H 16, 4 heads, F 32, V 11
  for (int r = 0; r < 2; ++r) {
    ParameterStore store(model_parameter_specs(c, tp_layout(r, 2)), host_context());  // fills the defaults
    const auto& specs = store.specs();
    const ParamSpec& q = find(specs, "layers.0.attention.q_proj.weight");
    CHECK(q.shape == Shape{8, 16});
    CHECK(q.global_shape == Shape{16, 16});
    CHECK(q.offset == Shape{8 * r, 0});
    const ParamSpec& qb = find(specs, "layers.0.attention.q_proj.bias");
    CHECK(qb.shape == Shape{8});
    CHECK(qb.offset == Shape{8 * r});
    const ParamSpec& down = find(specs, "layers.1.mlp.down_proj.weight");
    CHECK(down.shape == Shape{16, 16});
    CHECK(down.global_shape == Shape{16, 32});
    CHECK(down.offset == Shape{0, 16 * r});
    const ParamSpec& down_bias = find(specs, "layers.1.mlp.down_proj.bias");
    CHECK(down_bias.shape == Shape{16});
    CHECK(down_bias.tp_duplicated);
    CHECK(down_bias.replica == (r > 0));
    const ParamSpec& norm = find(specs, "final_norm.weight");
    CHECK(norm.tp_duplicated);
    CHECK(norm.replica == (r > 0));
    CHECK(find(specs, "embedding.position_embeddings.weight").tp_duplicated);
    // V = 11 padded to 256: rank 0 holds rows 0..127 (11 real), rank 1 rows 128..255 (none).
    const ParamSpec& word = find(specs, "embedding.word_embeddings.weight");
    CHECK(word.shape == Shape{128, 16});
    CHECK(word.global_shape == Shape{11, 16});
    CHECK(word.offset == Shape{128 * r, 0});
    CHECK(word.box == Shape{r == 0 ? 11 : 0, 16});
    CHECK_FALSE(word.replica);
  }
}

TEST_CASE("the tp ranks' boxes tile every global tensor exactly once (non-replicas)") {
  const ModelConfig c = lattice::testing::tiny_llama();
  for (const int tp : {1, 2}) {
    std::map<std::string, int64_t> covered, global;
    for (int r = 0; r < tp; ++r) {
      ParameterStore store(model_parameter_specs(c, tp_layout(r, tp)), host_context());
      for (const ParamSpec& s : store.specs()) {
        global[s.name] = shape_numel(s.global_shape);
        if (!s.replica) covered[s.name] += s.box_numel();
      }
    }
    for (const auto& [name, n] : global) {
      INFO("tp " << tp << " " << name);
      CHECK(covered[name] == n);
    }
  }
}

TEST_CASE("tp 1 specs are the one-process specs, with nothing duplicated or replicated") {
  const ModelConfig c = lattice::testing::tiny_gpt2();
  ParameterStore store(model_parameter_specs(c, ModelLayout{}), host_context());
  for (const ParamSpec& s : store.specs()) {
    INFO(s.name);
    CHECK(s.shape == s.global_shape);
    CHECK_FALSE(s.tp_duplicated);
    CHECK_FALSE(s.replica);
  }
}

TEST_CASE("heads, kv heads or FFN not divisible by tp are input errors naming the field") {
  ModelConfig c = lattice::testing::tiny_llama();  // 4 heads, 2 kv heads, F 32
  for (const auto& [tp, field] : {std::pair{3, "model.num_attention_heads"}, {4, "model.num_kv_heads"}}) {
    try {
      model_parameter_specs(c, tp_layout(0, tp));
      FAIL("expected an InputError");
    } catch (const InputError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  }
  c.ffn_hidden_size = 31;
  CHECK_THROWS_WITH(model_parameter_specs(c, tp_layout(1, 2)), Catch::Contains("model.ffn_hidden_size"));
  CHECK_THROWS_AS(model_parameter_specs(c, tp_layout(1, 2)), InputError);
}
