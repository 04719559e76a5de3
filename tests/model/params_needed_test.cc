// The forward's params-needed hook (what overlap_param_gather waits through): it must name every
// parameter of a chunk before the chunk reads it. Checked by poisoning every value with NaN and
// restoring a parameter only when the hook names it: the loss must come out exactly as without the
// hook, and every parameter of the store must have been named.
#include <cmath>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "kernels/ops.h"
#include "model/model_chunk.h"
#include "model/model_parameters.h"
#include "tests/tiny_models.h"

using namespace lattice;

namespace {

// Runs the chunks of `layout` (one pipeline rank; its chunks in order, each fed the previous one's
// output) forward on a fixed batch and returns the last chunk's token losses (or output).
std::vector<float> run_forward(const ModelConfig& c, const ModelLayout& layout, ParameterStore& store,
                               const ModelChunk::ParamsNeededHook& hook) {
  constexpr int64_t B = 2;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size - 1));
  Tensor ids = Tensor::empty({B, c.seq_length}, DType::kI32), targets = Tensor::empty({B, c.seq_length}, DType::kI32);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.i32()[i] = token(rng);
    targets.i32()[i] = token(rng);
  }
  Tensor hidden = Tensor::empty({B * c.seq_length, c.hidden_size});
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < hidden.numel(); ++i) hidden.f32()[i] = normal(rng);  // input of a later stage
  Tensor losses = Tensor::empty({B * c.seq_length});
  for (int chunk = 0; chunk < layout.num_chunks(); ++chunk) {
    ModelChunk m(c, layout, chunk, store, TensorParallel{}, B, 1);
    m.set_params_needed_hook(hook);
    Tensor out = Tensor::empty(m.activation_shape());
    m.forward(0, ids, targets, hidden, out, losses);
    if (!m.has_head()) hidden = out;
  }
  const Tensor& result = layout.has_head(layout.num_chunks() - 1) ? losses : hidden;
  return std::vector<float>(result.f32(), result.f32() + result.numel());
}

void check_hook_covers_reads(const ModelConfig& c, const ModelLayout& layout) {
  ParameterStore store(model_parameter_specs(c, layout), host_context());
  store.initialize(1234);
  Tensor reference = Tensor::empty({store.numel()});
  ops::copy(store.flat_values(), reference);
  const std::vector<float> expected = run_forward(c, layout, store, {});

  ops::fill(store.flat_values(), std::nanf(""));
  std::set<size_t> named;
  int64_t offset = 0;
  std::vector<int64_t> offsets;
  for (size_t i = 0; i < store.count(); ++i) {
    offsets.push_back(offset);
    offset += store.value(i).numel();
  }
  const auto restore = [&](const std::vector<size_t>& indices) {
    for (const size_t i : indices) {
      named.insert(i);
      ops::copy(reference.slice_flat(offsets[i], store.value(i).shape()), store.value(i));
    }
  };
  const std::vector<float> got = run_forward(c, layout, store, restore);
  CHECK(named.size() == store.count());
  REQUIRE(got.size() == expected.size());
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == expected[i]);
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("params-needed hook names every parameter before the forward reads it") {
  for (const ModelConfig& base : {testing::tiny_gpt2(), testing::tiny_llama()}) {
    ModelConfig c = base;
    c.num_layers = 4;
    INFO("arch " << arch_name(c.arch));
    check_hook_covers_reads(c, ModelLayout{});  // the whole model
    ModelLayout interleaved;                     // one pipeline rank with two chunks
    interleaved.virtual_stages = 2;
    check_hook_covers_reads(c, interleaved);
    ModelLayout last_stage;  // the last of two stages: tied models hold the head replica there
    last_stage.pp_rank = 1;
    last_stage.pp_size = 2;
    check_hook_covers_reads(c, last_stage);
  }
}
