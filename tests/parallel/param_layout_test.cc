// The flat parameter layout and its buffers against a brute-force computation, for the rank layouts
// the trainer builds: tiny GPT-2 and Llama, tied and untied, under TP, PP (with virtual stages),
// TP + SP and TP × PP — every parameter's offset, the weight-decay and replica runs, and the views.
#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "parallel/grid.h"
#include "parallel/param_grad_buffer.h"
#include "tests/tiny_models.h"
#include "trainer/config.h"
#include "trainer/model_builder.h"

using namespace lattice;

namespace {

struct Layout {
  std::string label;
  Config config;
};

std::vector<Layout> layouts() {
  ModelConfig gpt2_untied = testing::tiny_gpt2();
  gpt2_untied.tie_embeddings = false;
  ModelConfig llama_tied = testing::tiny_llama();
  llama_tied.tie_embeddings = true;
  std::vector<Layout> out;
  for (const auto& [name, model] : {std::pair{"gpt2 tied", testing::tiny_gpt2()}, {"gpt2 untied", gpt2_untied},
                                    {"llama untied", testing::tiny_llama()}, {"llama tied", llama_tied}}) {
    // (tp, pp, virtual stages, sequence parallel)
    for (const auto& [tp, pp, v, sp] : {std::tuple{1, 1, 1, false}, {2, 1, 1, false}, {2, 1, 1, true},
                                        {1, 2, 1, false}, {1, 2, 2, false}, {2, 2, 1, true}}) {
      Config c;
      c.model = model;
      c.model.num_layers = 4;  // pp 2 × v 2 chunks of one layer
      c.model.seq_length = 8;  // divisible by tp under sequence parallelism
      c.parallel.tensor = tp;
      c.parallel.pipeline = pp;
      c.parallel.virtual_stages = v;
      c.parallel.sequence_parallel = sp;
      c.parallel.data = 1;
      out.push_back({fmt::format("{}, tp {} pp {} v {}{}", name, tp, pp, v, sp ? " sp" : ""), c});
    }
  }
  return out;
}

// The property a run groups by, read straight from the spec.
bool property_of(const ParamSpec& s, ParamProperty p) { return p == ParamProperty::kWeightDecay ? s.weight_decay : s.replica; }

// Brute force: walks every flat element, assigning it to the parameter whose element count it
// falls in, and checks the runs element by element — each run's elements all have its value,
// runs tile the buffer in order, and neighbouring runs differ (maximal).
void check_layout(const ParamGradBuffer& buffer) {
  const size_t n = buffer.count();
  std::vector<size_t> owner;  // flat element -> parameter
  std::vector<int64_t> first_element(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    first_element[i] = static_cast<int64_t>(owner.size());
    int64_t count = 1;
    for (const int64_t d : buffer.spec(i).shape) count *= d;
    for (int64_t k = 0; k < count; ++k) owner.push_back(i);
  }
  first_element[n] = static_cast<int64_t>(owner.size());
  REQUIRE(buffer.numel() == static_cast<int64_t>(owner.size()));
  for (size_t i = 0; i <= n; ++i) REQUIRE(buffer.offset(i) == first_element[i]);

  for (const ParamProperty p : {ParamProperty::kWeightDecay, ParamProperty::kReplica}) {
    const std::vector<ParamRun>& runs = buffer.runs(p);
    int64_t next = 0;
    size_t next_param = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      const ParamRun& run = runs[r];
      REQUIRE(run.offset == next);
      REQUIRE(run.first == next_param);
      REQUIRE(run.last >= run.first);
      REQUIRE(run.offset == first_element[run.first]);
      REQUIRE(run.offset + run.numel == first_element[run.last + 1]);
      for (size_t i = run.first; i <= run.last; ++i) REQUIRE(property_of(buffer.spec(i), p) == run.value);
      for (int64_t e = run.offset; e < run.offset + run.numel; ++e)
        REQUIRE(property_of(buffer.spec(owner[static_cast<size_t>(e)]), p) == run.value);
      if (r > 0) REQUIRE(runs[r - 1].value != run.value);
      next = run.offset + run.numel;
      next_param = run.last + 1;
    }
    REQUIRE(next == buffer.numel());
    REQUIRE(next_param == n);
  }

  // Every parameter's value and gradient are views at its offset of the flat buffers.
  REQUIRE(buffer.param_dtype() == DType::kF32);
  REQUIRE(buffer.grad_dtype() == DType::kF32);
  const auto* values = static_cast<const char*>(buffer.flat_values().raw());
  const auto* grads = static_cast<const char*>(buffer.flat_grads().raw());
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(buffer.value(i).shape() == buffer.spec(i).shape);
    REQUIRE(buffer.grad(i).shape() == buffer.spec(i).shape);
    REQUIRE(static_cast<const char*>(buffer.value(i).raw()) == values + first_element[i] * sizeof(float));
    REQUIRE(static_cast<const char*>(buffer.grad(i).raw()) == grads + first_element[i] * sizeof(float));
  }
}

}  // namespace

TEST_CASE("buffer offsets and runs match a brute-force walk on every rank of TP, PP, SP and tied layouts") {
  int replicas = 0, ranks = 0;
  for (const Layout& l : layouts()) {
    const Config& c = l.config;
    const int world = c.parallel.tensor * c.parallel.pipeline;
    for (int rank = 0; rank < world; ++rank) {
      INFO(l.label << ", rank " << rank);
      const RankGrid grid(world, rank, c.parallel.tensor, c.parallel.pipeline, 1);
      const ParamGradBuffer buffer(rank_parameter_specs(c, model_layout(c, grid, grid.coords())), DType::kF32,
                                   host_context());
      check_layout(buffer);
      for (const ParamRun& run : buffer.runs(ParamProperty::kReplica)) replicas += run.value ? 1 : 0;
      ++ranks;
    }
  }
  // The layouts exercise replicas (tp rank > 0, the tied head on the last stage).
  CHECK(replicas > 0);
  CHECK(ranks == 4 * (1 + 2 + 2 + 2 + 2 + 4));
}

TEST_CASE("an empty layout has no runs and one offset, 0") {
  const ParamGradBuffer buffer({}, DType::kF32, host_context());
  CHECK(buffer.numel() == 0);
  CHECK(buffer.offset(0) == 0);
  CHECK(buffer.runs(ParamProperty::kWeightDecay).empty());
  CHECK(buffer.runs(ParamProperty::kReplica).empty());
}
