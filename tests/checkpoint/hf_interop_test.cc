// HF interop: export/import round trips for GPT-2 and Llama, the name/transpose mapping checked
// against files the reference Python library wrote (values chosen by make_hf_files.py), and the
// errors for missing tensors, wrong shapes, wrong families and configs no HF family represents.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/hf_interop.h"
#include "checkpoint/safetensors.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "model/model_parameters.h"
#include "tests/checkpoint/python_helper.h"
#include "tests/log_capture.h"

using namespace lattice;
using lattice::testing::run_script_ok;
using lattice::testing::test_tmpdir;

namespace {

// Same numbers as GPT2 / LLAMA in make_hf_files.py.
ModelConfig tiny_gpt2() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.num_kv_heads = 4;
  c.ffn_hidden_size = 32;
  c.vocab_size = 11;
  c.seq_length = 8;
  c.norm = NormKind::kLayerNorm;
  c.activation = Activation::kGelu;
  c.position_embedding = PositionEmbedding::kLearned;
  c.tie_embeddings = true;
  c.bias = true;
  return c;
}

ModelConfig tiny_llama() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_hidden_size = 24;
  c.vocab_size = 13;
  c.seq_length = 8;
  c.norm = NormKind::kRmsNorm;
  c.activation = Activation::kSwiglu;
  c.position_embedding = PositionEmbedding::kRope;
  c.tie_embeddings = false;
  c.bias = false;
  return c;
}

// Distinct deterministic values written straight through the host pointer (no ops:: kernels).
void fill_distinct(ParameterStore& store) {
  for (size_t i = 0; i < store.count(); ++i) {
    Tensor& v = store.value(i);
    for (int64_t j = 0; j < v.numel(); ++j)
      v.f32()[j] = static_cast<float>(i + 1) * 1000.0f + static_cast<float>(j) * 0.5f - 7.25f;
  }
}

bool same_values(ParameterStore& a, ParameterStore& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.flat_values().raw(), b.flat_values().raw(), a.flat_values().bytes()) == 0;
}

std::string fresh_dir(const std::string& name) {
  const std::string d = test_tmpdir() + "/" + name;
  std::filesystem::remove_all(d);
  return d;
}

// make_hf_files.py's value(tag, i), tag = 1 + position of the HF name in the file's sorted names.
float py_value(int64_t tag, int64_t i) {
  return static_cast<float>(((7 * i + 13 * tag) % 2039) - 1019) / 64.0f;
}

struct PyFile {
  std::map<std::string, int64_t> tags;
  explicit PyFile(const std::string& path) {
    SafetensorsFile f(path);
    int64_t tag = 1;
    for (const std::string& n : f.names()) tags[n] = tag++;
  }
  int64_t tag(const std::string& name) const {
    INFO("python file lacks " << name);
    REQUIRE(tags.count(name) == 1);
    return tags.at(name);
  }
};

// Checks ours[r][c] (or ours[r] for 1-D) == python value at HF flat index hf_index(r, c).
template <typename F>
void expect_mapped(ParameterStore& store, const std::string& ours, const PyFile& py, const std::string& hf,
                   F hf_index) {
  const Tensor& v = store.value(ours);
  const int64_t rows = v.dim(0), cols = v.rank() == 2 ? v.dim(1) : 1;
  const int64_t tag = py.tag(hf);
  int64_t bad = 0;
  std::string first;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float want = py_value(tag, hf_index(r, c));
      const float have = v.f32()[r * cols + c];
      if (want != have && bad++ == 0) first = fmt::format("[{}, {}]: {} != {}", r, c, have, want);
    }
  INFO(ours << " <- " << hf << ": " << bad << " mismatches, first " << first);
  REQUIRE(bad == 0);
}

std::string import_error(const ModelConfig& c, const std::string& path) {
  ParameterStore store(model_parameter_specs(c), host_context());
  try {
    import_hf(c, path, store);
  } catch (const InputError& e) {
    CHECK(e.code() == ExitCode::kBadInput);
    return e.what();
  }
  return "";
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("HF export then import restores every parameter bitwise") {
  ModelConfig gpt2_untied = tiny_gpt2();
  gpt2_untied.tie_embeddings = false;
  ModelConfig llama_bias = tiny_llama();
  llama_bias.bias = true;
  llama_bias.tie_embeddings = true;
  ModelConfig llama_mha = tiny_llama();
  llama_mha.num_kv_heads = 4;
  const std::vector<std::pair<std::string, ModelConfig>> configs = {{"gpt2", tiny_gpt2()},
                                                                    {"gpt2_untied", gpt2_untied},
                                                                    {"llama", tiny_llama()},
                                                                    {"llama_bias_tied", llama_bias},
                                                                    {"llama_mha", llama_mha}};
  for (const auto& [label, config] : configs) {
    INFO(label);
    ParameterStore src(model_parameter_specs(config), host_context());
    fill_distinct(src);
    const std::string dir = fresh_dir("rt_" + label);
    export_hf(config, src, dir);
    REQUIRE(std::filesystem::exists(dir + "/model.safetensors"));
    REQUIRE(std::filesystem::exists(dir + "/config.json"));
    REQUIRE_FALSE(std::filesystem::exists(dir + "/model.safetensors.tmp"));
    REQUIRE_FALSE(std::filesystem::exists(dir + "/config.json.tmp"));

    ParameterStore dst(model_parameter_specs(config), host_context());
    import_hf(config, dir + "/model.safetensors", dst);
    REQUIRE(same_values(src, dst));

    SafetensorsFile f(dir + "/model.safetensors");
    REQUIRE(f.metadata().at("format") == "pt");
    for (const std::string& n : f.names()) REQUIRE(f.entry(n).dtype == "F32");
    REQUIRE(f.contains("lm_head.weight") == !config.tie_embeddings);
    nlohmann::json j = read_json(dir + "/config.json");
    REQUIRE(j.at("tie_word_embeddings") == config.tie_embeddings);
    REQUIRE(j.at("vocab_size") == config.vocab_size);
    if (config.arch == Arch::kGpt2) {
      REQUIRE(f.contains("wte.weight"));
      REQUIRE(f.contains("h.1.attn.c_attn.weight"));
      REQUIRE(f.entry("h.1.attn.c_attn.weight").shape == Shape{16, 48});
      REQUIRE(f.entry("h.0.mlp.c_fc.weight").shape == Shape{16, 32});
      REQUIRE(j.at("model_type") == "gpt2");
      REQUIRE(j.at("n_embd") == 16);
      REQUIRE(j.at("n_inner") == 32);
      REQUIRE(j.at("activation_function") == "gelu_new");
    } else {
      REQUIRE(f.contains("model.embed_tokens.weight"));
      REQUIRE(f.contains("model.layers.1.mlp.gate_proj.weight"));
      REQUIRE(f.contains("model.layers.0.self_attn.o_proj.bias") == config.bias);
      REQUIRE(f.entry("model.layers.0.self_attn.k_proj.weight").shape == Shape{config.num_kv_heads * 4, 16});
      REQUIRE(j.at("model_type") == "llama");
      REQUIRE(j.at("num_key_value_heads") == config.num_kv_heads);
      REQUIRE(j.at("attention_bias") == config.bias);
      REQUIRE(j.at("hidden_act") == "silu");
    }
  }
}

TEST_CASE("GPT-2 file from the Python library: Conv1D transposes, c_attn split, buffers ignored, export matches") {
  const std::string py = test_tmpdir() + "/py_gpt2.safetensors";
  run_script_ok("gpt2 '" + py + "'");
  const ModelConfig c = tiny_gpt2();
  ParameterStore store(model_parameter_specs(c), host_context());
  import_hf(c, py, store);

  const PyFile f(py);
  const int64_t H = 16, F = 32;
  const std::string t = "transformer.";
  expect_mapped(store, "embedding.word_embeddings.weight", f, t + "wte.weight",
                [&](int64_t r, int64_t col) { return r * H + col; });
  expect_mapped(store, "embedding.position_embeddings.weight", f, t + "wpe.weight",
                [&](int64_t r, int64_t col) { return r * H + col; });
  for (int i = 0; i < 2; ++i) {
    const std::string h = fmt::format("{}h.{}.", t, i), l = fmt::format("layers.{}.", i);
    const char* qkv[3] = {"q_proj", "k_proj", "v_proj"};
    for (int64_t j = 0; j < 3; ++j) {
      // q_proj row r, col c == c_attn[c][j*H + r]
      expect_mapped(store, l + "attention." + qkv[j] + ".weight", f, h + "attn.c_attn.weight",
                    [&](int64_t r, int64_t col) { return col * 3 * H + j * H + r; });
      expect_mapped(store, l + "attention." + qkv[j] + ".bias", f, h + "attn.c_attn.bias",
                    [&](int64_t r, int64_t) { return j * H + r; });
    }
    expect_mapped(store, l + "attention.o_proj.weight", f, h + "attn.c_proj.weight",
                  [&](int64_t r, int64_t col) { return col * H + r; });
    expect_mapped(store, l + "attention.o_proj.bias", f, h + "attn.c_proj.bias", [](int64_t r, int64_t) { return r; });
    expect_mapped(store, l + "mlp.up_proj.weight", f, h + "mlp.c_fc.weight",
                  [&](int64_t r, int64_t col) { return col * F + r; });
    expect_mapped(store, l + "mlp.up_proj.bias", f, h + "mlp.c_fc.bias", [](int64_t r, int64_t) { return r; });
    expect_mapped(store, l + "mlp.down_proj.weight", f, h + "mlp.c_proj.weight",
                  [&](int64_t r, int64_t col) { return col * H + r; });
    expect_mapped(store, l + "mlp.down_proj.bias", f, h + "mlp.c_proj.bias", [](int64_t r, int64_t) { return r; });
    for (const char* w : {"weight", "bias"}) {
      expect_mapped(store, l + "input_norm." + w, f, h + "ln_1." + w, [](int64_t r, int64_t) { return r; });
      expect_mapped(store, l + "post_attention_norm." + w, f, h + "ln_2." + w, [](int64_t r, int64_t) { return r; });
    }
  }
  expect_mapped(store, "final_norm.weight", f, t + "ln_f.weight", [](int64_t r, int64_t) { return r; });
  expect_mapped(store, "final_norm.bias", f, t + "ln_f.bias", [](int64_t r, int64_t) { return r; });

  // Export and let the Python library compare with its own file (prefix dropped, buffers and the
  // tied lm_head left out, c_attn fused and transposed back).
  const std::string dir = fresh_dir("export_py_gpt2");
  export_hf(c, store, dir);
  run_script_ok("compare '" + dir + "' '" + py + "' gpt2");
}

TEST_CASE("Llama F16 file from the Python library: names map 1:1, GQA shapes, export matches") {
  const std::string py = test_tmpdir() + "/py_llama.safetensors";
  run_script_ok("llama '" + py + "'");
  const ModelConfig c = tiny_llama();
  ParameterStore store(model_parameter_specs(c), host_context());
  import_hf(c, py, store);

  const PyFile f(py);
  auto flat = [&](const std::string& ours, const std::string& hf) {
    const int64_t cols = store.value(ours).rank() == 2 ? store.value(ours).dim(1) : 1;
    expect_mapped(store, ours, f, hf, [cols](int64_t r, int64_t col) { return r * cols + col; });
  };
  flat("embedding.word_embeddings.weight", "model.embed_tokens.weight");
  flat("final_norm.weight", "model.norm.weight");
  flat("lm_head.weight", "lm_head.weight");
  for (int i = 0; i < 2; ++i) {
    const std::string h = fmt::format("model.layers.{}.", i), l = fmt::format("layers.{}.", i);
    flat(l + "input_norm.weight", h + "input_layernorm.weight");
    flat(l + "post_attention_norm.weight", h + "post_attention_layernorm.weight");
    for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
      flat(l + "attention." + p + ".weight", h + "self_attn." + p + ".weight");
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) flat(l + "mlp." + p + ".weight", h + "mlp." + p + ".weight");
  }
  REQUIRE(store.value("layers.0.attention.k_proj.weight").shape() == Shape{8, 16});

  const std::string dir = fresh_dir("export_py_llama");
  export_hf(c, store, dir);
  run_script_ok("compare '" + dir + "' '" + py + "' llama");
}

TEST_CASE("HF model directories from the Python library: model.safetensors, or shards and their index") {
  const ModelConfig c = tiny_llama();
  const std::string file = test_tmpdir() + "/py_llama_ref.safetensors";
  run_script_ok("llama '" + file + "'");
  ParameterStore want(model_parameter_specs(c), host_context());
  import_hf(c, file, want);
  for (const int shards : {1, 3}) {
    INFO(shards << " shard(s)");
    const std::string dir = fresh_dir(fmt::format("py_llama_dir{}", shards));
    run_script_ok(fmt::format("llama-dir '{}' {}", dir, shards));
    ParameterStore got(model_parameter_specs(c), host_context());
    import_hf(c, dir, got);
    REQUIRE(same_values(got, want));
  }

  const std::string sharded = test_tmpdir() + "/py_llama_dir3";
  SECTION("a missing shard is named") {
    std::filesystem::remove(sharded + "/model-00002-of-00003.safetensors");
    REQUIRE_THAT(import_error(c, sharded), Catch::Contains(sharded + "/model-00002-of-00003.safetensors") &&
                                               Catch::Contains("missing"));
  }
  SECTION("an index that puts a tensor in the wrong shard") {
    const std::string index = sharded + "/model.safetensors.index.json";
    nlohmann::json j = nlohmann::json::parse(std::ifstream(index));
    const std::string name = j["weight_map"].begin().key(), shard = j["weight_map"].begin().value();
    j["weight_map"][name] = shard == "model-00001-of-00003.safetensors" ? "model-00002-of-00003.safetensors"
                                                                      : "model-00001-of-00003.safetensors";
    std::ofstream(index) << j.dump();
    REQUIRE_THAT(import_error(c, sharded), Catch::Contains("'" + name + "'") && Catch::Contains("does not hold it"));
  }
  SECTION("a directory without weights") {
    const std::string empty = fresh_dir("no_weights");
    std::filesystem::create_directories(empty);
    REQUIRE_THAT(import_error(c, empty), Catch::Contains(empty) && Catch::Contains("model.safetensors.index.json"));
  }
}

TEST_CASE("an export over an earlier sharded save removes it, and model.safetensors is read first") {
  const ModelConfig c = tiny_llama();
  const std::string dir = fresh_dir("export_over_shards");
  run_script_ok(fmt::format("llama-dir '{}' 3", dir));  // the Python library's sharded save
  std::ofstream(dir + "/notes.txt") << "the user's own file\n";
  ParameterStore old_model(model_parameter_specs(c), host_context());
  import_hf(c, dir, old_model);

  ParameterStore src(model_parameter_specs(c), host_context());
  fill_distinct(src);
  REQUIRE_FALSE(same_values(src, old_model));
  export_hf(c, src, dir, std::nullopt, DType::kF32);
  for (const char* gone : {"model.safetensors.index.json", "model-00001-of-00003.safetensors",
                           "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
    INFO(gone);
    CHECK_FALSE(std::filesystem::exists(dir + "/" + gone));
  }
  CHECK(std::filesystem::exists(dir + "/notes.txt"));
  ParameterStore back(model_parameter_specs(c), host_context());
  import_hf(c, dir, back);
  REQUIRE(same_values(back, src));

  // A directory holding both (an older lattice's export over shards): model.safetensors is the model,
  // as for transformers.
  run_script_ok(fmt::format("llama-dir '{}' 3", dir + "_shards"));
  for (const auto& entry : std::filesystem::directory_iterator(dir + "_shards")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("model-", 0) == 0 || name == "model.safetensors.index.json")
      std::filesystem::copy_file(entry.path(), dir + "/" + name);
  }
  ParameterStore both(model_parameter_specs(c), host_context());
  import_hf(c, dir, both);
  REQUIRE(same_values(both, src));
}

TEST_CASE("init_from warns where the model directory's config.json differs in what no tensor shape shows") {
  const ModelConfig c = tiny_llama();
  ParameterStore src(model_parameter_specs(c), host_context());
  fill_distinct(src);
  const std::string dir = fresh_dir("config_differs");
  export_hf(c, src, dir, std::nullopt, DType::kF32);
  const auto import_log = [&] {
    return lattice::testing::captured_log([&] {
      ParameterStore back(model_parameter_specs(c), host_context());
      import_hf(c, dir, back);
    });
  };
  CHECK_THAT(import_log(), !Catch::Contains("[warning]"));  // its own export agrees
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  j["rope_theta"] = 500000.0;  // Llama 3's
  j["rms_norm_eps"] = 1e-6;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  std::ofstream(dir + "/config.json") << j.dump();
  const std::string log = import_log();
  CHECK_THAT(log, Catch::Contains("rope_theta = 500000 but model.rope_theta is 10000") &&
                      Catch::Contains("--set model.rope_theta=500000") && Catch::Contains("--set model.norm_eps=1e-06") &&
                      Catch::Contains("rope_scaling") && Catch::Contains("does not apply"));
  // transformers 5's form: the base and the scaling in rope_parameters, no top-level rope_theta.
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "llama3"}, {"factor", 8.0}};
  std::ofstream(dir + "/config.json") << j.dump();
  CHECK_THAT(import_log(), Catch::Contains("rope_parameters.rope_theta = 500000 but model.rope_theta is 10000") &&
                               Catch::Contains("has rope_parameters {") && Catch::Contains("does not apply"));
  j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
  j.erase("rms_norm_eps");
  std::ofstream(dir + "/config.json") << j.dump();
  CHECK_THAT(import_log(), !Catch::Contains("[warning]"));
}

TEST_CASE("init_from warns about a GPT-2 whose config.json scales attention otherwise") {
  const ModelConfig c = tiny_gpt2();
  ParameterStore src(model_parameter_specs(c), host_context());
  fill_distinct(src);
  const std::string dir = fresh_dir("gpt2_attention_scale");
  export_hf(c, src, dir, std::nullopt, DType::kF32);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  j["scale_attn_by_inverse_layer_idx"] = true;
  j["scale_attn_weights"] = false;
  std::ofstream(dir + "/config.json") << j.dump();
  const std::string log = lattice::testing::captured_log([&] {
    ParameterStore back(model_parameter_specs(c), host_context());
    import_hf(c, dir, back);
  });
  CHECK_THAT(log, Catch::Contains("scale_attn_by_inverse_layer_idx = true, which lattice does not apply") &&
                      Catch::Contains("scale_attn_weights = false"));
}

TEST_CASE("a bf16 export holds BF16 tensors and imports back as the rounded values") {
  const ModelConfig c = tiny_llama();
  ParameterStore src(model_parameter_specs(c), host_context());
  fill_distinct(src);
  const std::string dir = fresh_dir("export_bf16");
  export_hf(c, src, dir, std::nullopt, DType::kBF16);
  REQUIRE(nlohmann::json::parse(std::ifstream(dir + "/config.json"))["torch_dtype"] == "bfloat16");
  const SafetensorsFile file(dir + "/model.safetensors");
  for (const std::string& name : file.names()) {
    INFO(name);
    REQUIRE(file.entry(name).dtype == "BF16");
  }
  // Import casts to f32; the expected values are the f32 ones rounded through bf16.
  ParameterStore got(model_parameter_specs(c), host_context());
  import_hf(c, dir, got);
  Tensor narrow = Tensor::empty({src.numel()}, DType::kBF16);
  ops::cast(src.flat_values(), narrow);
  ParameterStore want(model_parameter_specs(c), host_context());
  ops::cast(narrow, want.flat_values());
  REQUIRE(same_values(got, want));
  REQUIRE_FALSE(same_values(got, src));  // the values did need rounding
}

TEST_CASE("HF import errors name the tensor, the file and the field to fix") {
  // A valid GPT-2 export to mutate.
  const ModelConfig c = tiny_gpt2();
  ParameterStore src(model_parameter_specs(c), host_context());
  fill_distinct(src);
  const std::string dir = fresh_dir("err_base");
  export_hf(c, src, dir);
  const auto base = read_safetensors(dir + "/model.safetensors");
  auto variant = [&](const std::string& name, auto edit) {
    auto tensors = base;
    edit(tensors);
    const std::string path = test_tmpdir() + "/" + name + ".safetensors";
    write_safetensors(path, tensors);
    return path;
  };

  SECTION("missing tensor") {
    const std::string path = variant("missing", [](auto& t) { t.erase("h.1.mlp.c_fc.bias"); });
    const std::string msg = import_error(c, path);
    REQUIRE_THAT(msg, Catch::Contains("'h.1.mlp.c_fc.bias'") && Catch::Contains(path) && Catch::Contains("GPT-2"));
  }
  SECTION("wrong shape names the field") {
    std::string path = variant("shape_ffn", [](auto& t) { t["h.0.mlp.c_fc.weight"] = Tensor::zeros({16, 64}); });
    REQUIRE_THAT(import_error(c, path), Catch::Contains("'h.0.mlp.c_fc.weight'") && Catch::Contains("[16, 64]") &&
                                            Catch::Contains("[16, 32]") && Catch::Contains("ffn_hidden_size"));
    path = variant("shape_vocab", [](auto& t) { t["wte.weight"] = Tensor::zeros({50, 16}); });
    REQUIRE_THAT(import_error(c, path), Catch::Contains("'wte.weight'") && Catch::Contains("vocab_size"));
  }
  SECTION("unexpected extra tensors") {
    const std::string path = variant("extra", [](auto& t) {
      t["h.0.attn.rotary.weight"] = Tensor::zeros({2});
      t["score.weight"] = Tensor::zeros({2});
    });
    REQUIRE_THAT(import_error(c, path), Catch::Contains("'h.0.attn.rotary.weight'") && Catch::Contains("score.weight"));
  }
  SECTION("layer count differs") {
    ModelConfig one = c;
    one.num_layers = 1;
    REQUIRE_THAT(import_error(one, dir + "/model.safetensors"),
                 Catch::Contains("2 layers") && Catch::Contains("num_layers"));
  }
  SECTION("untied lm_head into a tied config") {
    const std::string path = variant("untied", [](auto& t) { t["lm_head.weight"] = Tensor::zeros({11, 16}); });
    REQUIRE_THAT(import_error(c, path), Catch::Contains("lm_head.weight") && Catch::Contains("tie_embeddings"));
    // ...while a tied copy is accepted.
    const std::string ok = variant("tied", [](auto& t) { t["lm_head.weight"] = t.at("wte.weight"); });
    REQUIRE(import_error(c, ok).empty());
  }
  SECTION("a tied file into an untied config is told to tie") {
    ModelConfig untied = c;
    untied.tie_embeddings = false;
    REQUIRE_THAT(import_error(untied, dir + "/model.safetensors"),
                 Catch::Contains("'lm_head.weight'") && Catch::Contains("set model.tie_embeddings to true"));
  }
  SECTION("wrong family") {
    const std::string llama_py = test_tmpdir() + "/py_llama_for_errors.safetensors";
    run_script_ok("llama '" + llama_py + "'");
    REQUIRE_THAT(import_error(c, llama_py), Catch::Contains("'wte.weight'") && Catch::Contains("llama"));
    REQUIRE_THAT(import_error(tiny_llama(), dir + "/model.safetensors"),
                 Catch::Contains("'model.embed_tokens.weight'") && Catch::Contains("gpt2"));
  }
  SECTION("biases the config does not have") {
    ModelConfig with_bias = tiny_llama();
    with_bias.bias = true;
    ParameterStore s(model_parameter_specs(with_bias), host_context());
    fill_distinct(s);
    const std::string d = fresh_dir("err_llama_bias");
    export_hf(with_bias, s, d);
    REQUIRE_THAT(import_error(tiny_llama(), d + "/model.safetensors"),
                 Catch::Contains("k_proj.bias") && Catch::Contains("14 tensor(s)") && Catch::Contains("model.bias"));
    // And the other way round: a config with biases and a file without them.
    const std::string llama_py = test_tmpdir() + "/py_llama_no_bias.safetensors";
    run_script_ok("llama '" + llama_py + "'");
    REQUIRE_THAT(import_error(with_bias, llama_py),
                 Catch::Contains("'model.layers.0.self_attn.q_proj.bias'") && Catch::Contains("model.bias"));
  }
}

TEST_CASE("configs that no HF family represents are InputErrors naming the field") {
  ModelConfig c = tiny_gpt2();
  c.position_embedding = PositionEmbedding::kRope;
  REQUIRE_THROWS_WITH(hf_family(c), Catch::Contains("position_embedding"));
  ParameterStore store(model_parameter_specs(tiny_gpt2()), host_context());
  REQUIRE_THROWS_AS(export_hf(c, store, fresh_dir("mix")), InputError);
  REQUIRE_FALSE(std::filesystem::exists(test_tmpdir() + "/mix"));

  c = tiny_gpt2();
  c.num_kv_heads = 2;
  REQUIRE_THROWS_WITH(hf_family(c), Catch::Contains("num_kv_heads"));
  c = tiny_gpt2();
  c.bias = false;
  REQUIRE_THROWS_WITH(hf_family(c), Catch::Contains("model.bias"));
  c = tiny_llama();
  c.norm = NormKind::kLayerNorm;
  REQUIRE_THROWS_WITH(hf_family(c), Catch::Contains("model.norm"));
  c = tiny_llama();
  c.activation = Activation::kGelu;
  REQUIRE_THROWS_AS(hf_family(c), InputError);
  REQUIRE(hf_family(tiny_gpt2()) == HfFamily::kGpt2);
  REQUIRE(hf_family(tiny_llama()) == HfFamily::kLlama);
}
