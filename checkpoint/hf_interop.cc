// HF interop: the name/layout mapping between our parameters and GPT-2 / Llama checkpoints.
#include "checkpoint/hf_interop.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/hf_weights.h"
#include "checkpoint/safetensors.h"
#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

namespace {

// One of our parameters inside an HF tensor. Either a flat slice (same layout; `offset` counts
// elements) or, for GPT-2 Conv1D weights stored [in, total_out], the transpose of the columns
// [offset, offset + out) into our [out, in].
struct Part {
  std::string internal;
  Shape internal_shape;
  bool transposed = false;
  int64_t offset = 0;
};

struct HfTensor {
  std::string name;                     // HF name without the family prefix
  bool prefixed = true;                 // false: lm_head.weight sits outside "transformer."/"model."
  Shape shape;                          // HF shape
  std::vector<std::string> dim_fields;  // the model field behind each dim, for shape-mismatch hints
  std::vector<Part> parts;
};

struct Mapping {
  HfFamily family;
  std::string family_name;            // "GPT-2", "Llama"
  std::vector<std::string> prefixes;  // accepted prefixes; the first is what export writes
  std::string layer_prefix;           // "h." / "layers." (after the family prefix)
  std::string embedding;              // HF name of the token embedding (after the prefix)
  std::vector<HfTensor> tensors;
  std::vector<std::string> buffer_suffixes;  // non-parameter tensors HF files may hold
};

HfTensor same(std::string name, std::string internal, Shape shape, std::vector<std::string> fields) {
  HfTensor t{std::move(name), true, shape, std::move(fields), {}};
  t.parts.push_back(Part{std::move(internal), shape, false, 0});
  return t;
}

// GPT-2 Conv1D weight: HF [in, out], ours [out, in].
HfTensor conv1d(std::string name, std::string internal, int64_t in, int64_t out, std::vector<std::string> fields) {
  HfTensor t{std::move(name), true, {in, out}, std::move(fields), {}};
  t.parts.push_back(Part{std::move(internal), {out, in}, true, 0});
  return t;
}

const char* kVocab = "vocab_size";
const char* kHidden = "hidden_size";

Mapping gpt2_mapping(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.ffn_hidden_size, V = c.vocab_size, S = c.seq_length;
  const std::string kF = "ffn_hidden_size (HF n_inner)";
  const std::string k3H = "hidden_size (c_attn holds 3 x hidden_size: q|k|v)";
  Mapping m{HfFamily::kGpt2, "GPT-2", {"", "transformer."}, "h.", "wte.weight", {},
            {".attn.bias", ".attn.masked_bias"}};
  auto& t = m.tensors;
  t.push_back(same("wte.weight", "embedding.word_embeddings.weight", {V, H}, {kVocab, kHidden}));
  t.push_back(same("wpe.weight", "embedding.position_embeddings.weight", {S, H},
                   {"seq_length (HF n_positions)", kHidden}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string h = fmt::format("h.{}.", i);
    const std::string l = fmt::format("layers.{}.", i);
    for (const char* w : {"weight", "bias"})
      t.push_back(same(h + "ln_1." + w, l + "input_norm." + w, {H}, {kHidden}));
    HfTensor qkv{h + "attn.c_attn.weight", true, {H, 3 * H}, {kHidden, k3H}, {}};
    HfTensor qkv_b{h + "attn.c_attn.bias", true, {3 * H}, {k3H}, {}};
    const char* names[3] = {"q_proj", "k_proj", "v_proj"};
    for (int j = 0; j < 3; ++j) {
      const std::string p = l + "attention." + names[j];
      qkv.parts.push_back(Part{p + ".weight", {H, H}, true, j * H});
      qkv_b.parts.push_back(Part{p + ".bias", {H}, false, j * H});
    }
    t.push_back(std::move(qkv));
    t.push_back(std::move(qkv_b));
    t.push_back(conv1d(h + "attn.c_proj.weight", l + "attention.o_proj.weight", H, H, {kHidden, kHidden}));
    t.push_back(same(h + "attn.c_proj.bias", l + "attention.o_proj.bias", {H}, {kHidden}));
    for (const char* w : {"weight", "bias"})
      t.push_back(same(h + "ln_2." + w, l + "post_attention_norm." + w, {H}, {kHidden}));
    t.push_back(conv1d(h + "mlp.c_fc.weight", l + "mlp.up_proj.weight", H, F, {kHidden, kF}));
    t.push_back(same(h + "mlp.c_fc.bias", l + "mlp.up_proj.bias", {F}, {kF}));
    t.push_back(conv1d(h + "mlp.c_proj.weight", l + "mlp.down_proj.weight", F, H, {kF, kHidden}));
    t.push_back(same(h + "mlp.c_proj.bias", l + "mlp.down_proj.bias", {H}, {kHidden}));
  }
  for (const char* w : {"weight", "bias"})
    t.push_back(same(std::string("ln_f.") + w, std::string("final_norm.") + w, {H}, {kHidden}));
  if (!c.tie_embeddings) {
    t.push_back(same("lm_head.weight", "lm_head.weight", {V, H}, {kVocab, kHidden}));
    t.back().prefixed = false;
  }
  return m;
}

Mapping llama_mapping(const ModelConfig& c) {
  const int64_t H = c.hidden_size, F = c.ffn_hidden_size, V = c.vocab_size, D = c.head_dim();
  const int64_t Q = c.num_attention_heads * D, KV = c.num_kv_heads * D;
  const std::string kF = "ffn_hidden_size (HF intermediate_size)";
  const std::string kQ = "num_attention_heads x head_dim";
  const std::string kKV = "num_kv_heads x head_dim (HF num_key_value_heads)";
  Mapping m{HfFamily::kLlama, "Llama", {"model.", ""}, "layers.", "embed_tokens.weight", {},
            {".rotary_emb.inv_freq"}};
  auto& t = m.tensors;
  t.push_back(same("embed_tokens.weight", "embedding.word_embeddings.weight", {V, H}, {kVocab, kHidden}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string h = fmt::format("layers.{}.", i);
    const std::string l = fmt::format("layers.{}.", i);
    t.push_back(same(h + "input_layernorm.weight", l + "input_norm.weight", {H}, {kHidden}));
    struct Lin {
      const char* hf;
      const char* ours;
      int64_t out, in;
      std::string out_field, in_field;
    };
    auto add = [&](const Lin& lin) {
      t.push_back(same(h + lin.hf + ".weight", l + lin.ours + ".weight", {lin.out, lin.in},
                       {lin.out_field, lin.in_field}));
      if (c.bias) t.push_back(same(h + lin.hf + ".bias", l + lin.ours + ".bias", {lin.out}, {lin.out_field}));
    };
    add({"self_attn.q_proj", "attention.q_proj", Q, H, kQ, kHidden});
    add({"self_attn.k_proj", "attention.k_proj", KV, H, kKV, kHidden});
    add({"self_attn.v_proj", "attention.v_proj", KV, H, kKV, kHidden});
    add({"self_attn.o_proj", "attention.o_proj", H, Q, kHidden, kQ});
    t.push_back(same(h + "post_attention_layernorm.weight", l + "post_attention_norm.weight", {H}, {kHidden}));
    add({"mlp.gate_proj", "mlp.gate_proj", F, H, kF, kHidden});
    add({"mlp.up_proj", "mlp.up_proj", F, H, kF, kHidden});
    add({"mlp.down_proj", "mlp.down_proj", H, F, kHidden, kF});
  }
  t.push_back(same("norm.weight", "final_norm.weight", {H}, {kHidden}));
  if (!c.tie_embeddings) {
    t.push_back(same("lm_head.weight", "lm_head.weight", {V, H}, {kVocab, kHidden}));
    t.back().prefixed = false;
  }
  return m;
}

Mapping mapping_for(const ModelConfig& c) {
  return hf_family(c) == HfFamily::kGpt2 ? gpt2_mapping(c) : llama_mapping(c);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// What the file looks like, for the hint of a missing-tensor error.
std::string describe_file(const HfWeights& f) {
  if (f.contains("model.embed_tokens.weight"))
    return "the file looks like a Llama-family checkpoint (it has 'model.embed_tokens.weight'): set model.arch "
           "to \"llama\" (rmsnorm, swiglu, rope)";
  if (f.contains("embed_tokens.weight"))
    return "the file looks like a Llama-family checkpoint without the 'model.' prefix (it has "
           "'embed_tokens.weight'): set model.arch to \"llama\"";
  if (f.contains("transformer.wte.weight"))
    return "the file looks like a GPT-2 checkpoint with the 'transformer.' prefix (it has "
           "'transformer.wte.weight'): set model.arch to \"gpt2\" (layernorm, gelu, learned positions)";
  if (f.contains("wte.weight"))
    return "the file looks like a GPT-2 checkpoint (it has 'wte.weight'): set model.arch to \"gpt2\" (layernorm, "
           "gelu, learned positions)";
  if (f.contains("gpt_neox.embed_in.weight"))
    return "the file looks like a GPT-NeoX checkpoint, which Lattice cannot import (GPT-2 and Llama layouts only)";
  std::vector<std::string> names = f.names();
  if (names.size() > 5) names.resize(5);
  return fmt::format("the file's tensors ({}) match neither the GPT-2 nor the Llama layout",
                     names.empty() ? std::string("none") : fmt::format("'{}', ...", fmt::join(names, "', '")));
}

// Number of layers in the file: 1 + the largest index in "<prefix><layer_prefix>{i}.".
int64_t file_layers(const HfWeights& f, const std::string& start) {
  int64_t count = 0;
  for (const std::string& name : f.names()) {
    if (!starts_with(name, start)) continue;
    size_t pos = start.size();
    int64_t idx = 0;
    size_t digits = 0;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && digits < 9) {
      idx = idx * 10 + (name[pos] - '0');
      ++pos;
      ++digits;
    }
    if (digits > 0 && pos < name.size() && name[pos] == '.') count = std::max(count, idx + 1);
  }
  return count;
}

std::string shape_hint(const HfTensor& t, const Shape& found) {
  if (found.size() != t.shape.size())
    return fmt::format("it has {} dims instead of {} (a different model family or layout?)", found.size(),
                       t.shape.size());
  std::vector<std::string> fields;
  for (size_t d = 0; d < found.size(); ++d)
    if (found[d] != t.shape[d])
      fields.push_back(fmt::format("dim {} is {} not {}: check model.{}", d, found[d], t.shape[d], t.dim_fields[d]));
  return fmt::format("{}", fmt::join(fields, "; "));
}

void copy_into_ours(const Part& p, const float* hf, const Shape& hf_shape, float* ours) {
  const int64_t n = shape_numel(p.internal_shape);
  if (!p.transposed) {
    if (n > 0) std::memcpy(ours, hf + p.offset, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const int64_t out = p.internal_shape[0], in = p.internal_shape[1], total = hf_shape[1];
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) ours[r * in + c] = hf[c * total + p.offset + r];
}

void copy_into_hf(const Part& p, const float* ours, const Shape& hf_shape, float* hf) {
  const int64_t n = shape_numel(p.internal_shape);
  if (!p.transposed) {
    if (n > 0) std::memcpy(hf + p.offset, ours, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const int64_t out = p.internal_shape[0], in = p.internal_shape[1], total = hf_shape[1];
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) hf[c * total + p.offset + r] = ours[r * in + c];
}

void check_host(const Tensor& t, const std::string& name) {
  LATTICE_CHECK(t.device() == Device::kCpu && t.dtype() == DType::kF32,
                "HF interop reads and writes host f32 parameters; '{}' is {}", name, t.describe());
}

}  // namespace

HfFamily hf_family(const ModelConfig& c) {
  auto mismatch = [&](const std::string& field, const std::string& have, const std::string& need,
                      const std::string& family) {
    throw InputError(fmt::format(
        "model.{} is {} but model.arch \"{}\" maps to the Hugging Face {} family, which needs model.{} = {}; no HF "
        "family represents this mix (set model.{} to {}, or change model.arch)",
        field, have, arch_name(c.arch), family, field, need, field, need));
  };
  if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0)
    throw InputError(fmt::format("model.hidden_size {} is not a multiple of model.num_attention_heads {}",
                                 c.hidden_size, c.num_attention_heads));
  if (c.arch == Arch::kGpt2) {
    if (c.norm != NormKind::kLayerNorm) mismatch("norm", norm_name(c.norm), "\"layernorm\"", "GPT-2");
    if (c.activation != Activation::kGelu) mismatch("activation", activation_name(c.activation), "\"gelu\"", "GPT-2");
    if (c.position_embedding != PositionEmbedding::kLearned)
      mismatch("position_embedding", position_embedding_name(c.position_embedding), "\"learned\"", "GPT-2");
    if (!c.bias) mismatch("bias", "false", "true", "GPT-2");
    if (c.num_kv_heads != c.num_attention_heads)
      mismatch("num_kv_heads", std::to_string(c.num_kv_heads),
               fmt::format("{} (model.num_attention_heads: GPT-2 has no grouped-query attention)",
                           c.num_attention_heads),
               "GPT-2");
    return HfFamily::kGpt2;
  }
  if (c.norm != NormKind::kRmsNorm) mismatch("norm", norm_name(c.norm), "\"rmsnorm\"", "Llama");
  if (c.activation != Activation::kSwiglu) mismatch("activation", activation_name(c.activation), "\"swiglu\"", "Llama");
  if (c.position_embedding != PositionEmbedding::kRope)
    mismatch("position_embedding", position_embedding_name(c.position_embedding), "\"rope\"", "Llama");
  return HfFamily::kLlama;
}

namespace {

// The settings of a model directory's config.json that no tensor shape shows (the norms' epsilon,
// RoPE's base and scaling, the activation): a difference gives another model than the one the weights
// were trained as, with no error, so each is warned about with the --set that matches it.
void warn_on_hf_config_differences(const ModelConfig& c, const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || !std::filesystem::is_regular_file(file, ec)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::ifstream(file));
  } catch (const nlohmann::json::exception&) {
    return;  // not ours to judge: the weights are what is read
  }
  if (!j.is_object()) return;
  const bool gpt2 = hf_family(c) == HfFamily::kGpt2;
  const auto differs = [](double a, double b) { return std::abs(a - b) > 1e-6 * std::max(std::abs(a), std::abs(b)); };
  // `key` of `obj` (j itself, or a nested object named `where`, "rope_parameters.").
  const auto check_number = [&](const nlohmann::json& obj, const std::string& where, const char* key, double ours,
                                const char* field) {
    if (!obj.contains(key) || !obj[key].is_number()) return;
    const double theirs = obj[key].get<double>();
    if (differs(theirs, ours))
      spdlog::warn("model.init_from: {} says {}{} = {} but {} is {}: the weights were trained with {}; --set {}={} "
                   "unless the change is meant",
                   file.string(), where, key, theirs, field, ours, theirs, field, theirs);
  };
  check_number(j, "", gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", c.norm_eps, "model.norm_eps");
  if (c.position_embedding == PositionEmbedding::kRope) {
    const auto unapplied_scaling = [&](const std::string& what) {
      spdlog::warn("model.init_from: {} has {}, which lattice does not apply: positions are rotated as plain RoPE "
                   "with base model.rope_theta",
                   file.string(), what);
    };
    check_number(j, "", "rope_theta", c.rope_theta, "model.rope_theta");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      unapplied_scaling("rope_scaling " + j["rope_scaling"].dump());
    // transformers 5 writes the base and the scaling as one object, with no top-level rope_theta.
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
      const nlohmann::json& rope = j["rope_parameters"];
      check_number(rope, "rope_parameters.", "rope_theta", c.rope_theta, "model.rope_theta");
      if (rope.contains("rope_type") && rope["rope_type"] != "default")
        unapplied_scaling("rope_parameters " + rope.dump());
    }
  }
  // GPT-2 variants that scale attention otherwise than by 1/sqrt(head_dim) (Stanford CRFM's models).
  const auto flag = [&](const char* key, bool fallback) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
  };
  if (gpt2 && flag("scale_attn_by_inverse_layer_idx", false))
    spdlog::warn("model.init_from: {} says scale_attn_by_inverse_layer_idx = true, which lattice does not apply: "
                 "layer i's attention scores are not divided by i + 1, so the model computes other outputs than "
                 "the one trained",
                 file.string());
  if (gpt2 && !flag("scale_attn_weights", true))
    spdlog::warn("model.init_from: {} says scale_attn_weights = false, but lattice scales attention scores by "
                 "1/sqrt(head_dim): the model computes other outputs than the one trained",
                 file.string());
  const char* act_key = gpt2 ? "activation_function" : "hidden_act";
  if (j.contains(act_key) && j[act_key].is_string()) {
    const std::string act = j[act_key].get<std::string>();
    const bool same = c.activation == Activation::kGelu ? (act == "gelu_new" || act == "gelu_pytorch_tanh")
                                                        : act == "silu";
    if (!same)
      spdlog::warn("model.init_from: {} says {} = \"{}\" but lattice's model.activation {} computes {}", file.string(),
                   act_key, act, c.activation == Activation::kGelu ? "gelu" : "swiglu",
                   c.activation == Activation::kGelu ? "GELU's tanh approximation (gelu_new)" : "SiLU (silu)");
  }
}

}  // namespace

int64_t largest_hf_tensor_numel(const ModelConfig& config) {
  int64_t largest = 0;
  for (const HfTensor& t : mapping_for(config).tensors) largest = std::max(largest, shape_numel(t.shape));
  return largest;
}

void import_hf(const ModelConfig& config, const std::string& path, ParameterStore& store) {
  std::vector<bool> filled(store.count(), false);
  read_hf(
      config, path, [&](const std::string& name) { return store.contains(name); },
      [&](const std::string& name, const Tensor& value) {
        const size_t idx = store.index(name);
        Tensor& v = store.value(idx);
        check_host(v, name);
        LATTICE_CHECK(v.shape() == value.shape(), "parameter '{}' is {} but the config says {}", name, v.describe(),
                      shape_string(value.shape()));
        ops::copy(value, v);
        filled[idx] = true;
      });
  for (size_t i = 0; i < store.count(); ++i)
    LATTICE_CHECK(filled[i], "parameter '{}' has no counterpart in the {} mapping (store and config differ)",
                  store.spec(i).name, mapping_for(config).family_name);
}

void read_hf(const ModelConfig& config, const std::string& path, const HfWanted& wanted, const HfTake& take) {
  const Mapping m = mapping_for(config);
  const HfWeights file(path);
  warn_on_hf_config_differences(config, path);

  // The family prefix: the one under which the token embedding exists.
  std::string prefix = m.prefixes.front();
  int found = 0;
  for (const std::string& p : m.prefixes)
    if (file.contains(p + m.embedding)) {
      prefix = p;
      ++found;
    }
  if (found > 1)
    throw InputError(fmt::format("HF file '{}' holds the {} embedding both with and without a prefix ('{}' and '{}')",
                                 path, m.family_name, m.prefixes[0] + m.embedding, m.prefixes[1] + m.embedding));

  const int64_t layers = file_layers(file, prefix + m.layer_prefix);
  if (layers > 0 && layers != config.num_layers)
    throw InputError(fmt::format("HF file '{}' has {} layers ('{}0.' ... '{}{}.') but model.num_layers is {}", path,
                                 layers, prefix + m.layer_prefix, prefix + m.layer_prefix, layers - 1,
                                 config.num_layers));

  std::set<std::string> used;
  int64_t read = 0;
  for (const HfTensor& t : m.tensors) {
    const std::string name = (t.prefixed ? prefix : std::string()) + t.name;
    if (!file.contains(name)) {
      std::string hint = describe_file(file);
      if (ends_with(name, ".bias") && file.contains(prefix + m.embedding))
        hint = "the file has no biases there: set model.bias to false if the checkpoint has none";
      if (name == "lm_head.weight" && !config.tie_embeddings && file.contains(prefix + m.embedding))
        hint = "the file's LM head is its embedding (tied): set model.tie_embeddings to true";
      throw InputError(fmt::format("HF file '{}' has no tensor '{}', which a {} model with this config needs; {}",
                                   path, name, m.family_name, hint));
    }
    const SafetensorsEntry& e = file.entry(name);
    if (e.shape != t.shape)
      throw InputError(fmt::format("HF tensor '{}' in '{}' has shape {} but this config expects {}: {}", name, path,
                                   shape_string(e.shape), shape_string(t.shape), shape_hint(t, e.shape)));
    used.insert(name);
    Tensor hf;  // read lazily: a rank (one pipeline stage) may need none of the parts
    for (const Part& p : t.parts) {
      if (!wanted(p.internal)) continue;
      if (!hf.defined()) {
        hf = file.read_f32(name);
        ++read;
      }
      Tensor value = Tensor::empty(p.internal_shape);
      copy_into_ours(p, hf.f32(), t.shape, value.f32());
      take(p.internal, value);
    }
  }

  // Everything else in the file must be a known buffer or a tied lm_head equal to the embedding.
  std::vector<std::string> extra;
  for (const std::string& name : file.names()) {
    if (used.count(name)) continue;
    bool buffer = false;
    for (const std::string& s : m.buffer_suffixes)
      if (starts_with(name, prefix + m.layer_prefix) && ends_with(name, s)) buffer = true;
    if (buffer) continue;
    if (name == "lm_head.weight" && config.tie_embeddings) {
      const std::string emb = prefix + m.embedding;
      Tensor head = file.read_f32(name);
      Tensor table = file.read_f32(emb);
      if (head.shape() != table.shape() || std::memcmp(head.raw(), table.raw(), head.bytes()) != 0)
        throw InputError(fmt::format("HF file '{}' has an 'lm_head.weight' that differs from '{}' (an untied output "
                                     "layer), but model.tie_embeddings is true: set model.tie_embeddings to false",
                                     path, emb));
      continue;
    }
    extra.push_back(name);
  }
  if (!extra.empty()) {
    std::string hint = "a checkpoint of another family or a differently configured model?";
    for (const std::string& x : extra)
      if (ends_with(x, ".bias") && !config.bias) hint = "the file has biases: set model.bias to true?";
    const size_t shown = std::min<size_t>(extra.size(), 5);
    throw InputError(fmt::format("HF file '{}' has {} tensor(s) that a {} model with this config does not use: '{}'{} "
                                 "({})",
                                 path, extra.size(), m.family_name,
                                 fmt::join(extra.begin(), extra.begin() + static_cast<std::ptrdiff_t>(shown), "', '"),
                                 extra.size() > shown ? ", ..." : "", hint));
  }

  spdlog::info("imported {} of the {} {} tensors from '{}'{}", read, used.size(), m.family_name, path,
               prefix.empty() ? std::string() : fmt::format(" (prefix '{}')", prefix));
}

std::string hf_config_json(const ModelConfig& c, std::optional<int32_t> eod_id, DType dtype) {
  LATTICE_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "HF export writes f32 or bf16, not {}",
                dtype_name(dtype));
  const char* torch_dtype = dtype == DType::kBF16 ? "bfloat16" : "float32";
  nlohmann::json j;
  if (hf_family(c) == HfFamily::kGpt2) {
    j = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", c.vocab_size},
         {"n_positions", c.seq_length},
         {"n_ctx", c.seq_length},
         {"n_embd", c.hidden_size},
         {"n_layer", c.num_layers},
         {"n_head", c.num_attention_heads},
         {"n_inner", c.ffn_hidden_size},
         {"activation_function", "gelu_new"},
         {"layer_norm_epsilon", c.norm_eps},
         {"initializer_range", c.init_std},
         {"resid_pdrop", 0.0},
         {"embd_pdrop", 0.0},
         {"attn_pdrop", 0.0},
         {"scale_attn_weights", true},
         {"tie_word_embeddings", c.tie_embeddings},
         {"use_cache", true},
         {"torch_dtype", torch_dtype}};
  } else {
    j = {{"architectures", {"LlamaForCausalLM"}},
         {"model_type", "llama"},
         {"vocab_size", c.vocab_size},
         {"hidden_size", c.hidden_size},
         {"intermediate_size", c.ffn_hidden_size},
         {"num_hidden_layers", c.num_layers},
         {"num_attention_heads", c.num_attention_heads},
         {"num_key_value_heads", c.num_kv_heads},
         {"head_dim", c.head_dim()},
         {"max_position_embeddings", c.seq_length},
         {"rms_norm_eps", c.norm_eps},
         {"rope_theta", c.rope_theta},
         {"hidden_act", "silu"},
         {"attention_bias", c.bias},
         {"mlp_bias", c.bias},
         {"attention_dropout", 0.0},
         {"initializer_range", c.init_std},
         {"tie_word_embeddings", c.tie_embeddings},
         {"use_cache", true},
         {"torch_dtype", torch_dtype}};
  }
  // Unknown: null, not absent, which transformers would fill with GPT-2's 50256 or Llama's 1 and 2.
  j["eos_token_id"] = eod_id ? nlohmann::json(*eod_id) : nlohmann::json(nullptr);
  j["bos_token_id"] = j["eos_token_id"];
  return j.dump(2) + "\n";
}

namespace {

// generation_config.json as save_pretrained writes it from a model config: the token ids
// generate() starts and stops with. Written so that an earlier save's file does not stay behind.
std::string hf_generation_config_json(std::optional<int32_t> eod_id) {
  const nlohmann::json id = eod_id ? nlohmann::json(*eod_id) : nlohmann::json(nullptr);
  return nlohmann::json{{"_from_model_config", true}, {"bos_token_id", id}, {"eos_token_id", id}}.dump(2) + "\n";
}

}  // namespace

void export_hf(const ModelConfig& config, const ParameterStore& store, const std::string& output_dir,
               std::optional<int32_t> eod_id, DType dtype) {
  const std::string config_text = hf_config_json(config, eod_id, dtype);
  const Mapping m = mapping_for(config);
  std::map<std::string, Tensor> out;
  for (const HfTensor& t : m.tensors) {
    Tensor hf = Tensor::empty(t.shape);
    for (const Part& p : t.parts) {
      if (!store.contains(p.internal))
        throw Error(fmt::format("cannot export: the parameter store has no '{}' (HF '{}{}'); export needs the "
                                "whole model in one store",
                                p.internal, t.prefixed ? m.prefixes.front() : std::string(), t.name));
      const Tensor& v = store.value(store.index(p.internal));
      check_host(v, p.internal);
      LATTICE_CHECK(v.shape() == p.internal_shape, "parameter '{}' is {} but the config says {}", p.internal,
                    v.describe(), shape_string(p.internal_shape));
      copy_into_hf(p, v.f32(), t.shape, hf.f32());
    }
    if (dtype != DType::kF32) {
      Tensor narrow = Tensor::empty(t.shape, dtype);
      ops::cast(hf, narrow);
      hf = std::move(narrow);
    }
    out.emplace((t.prefixed ? m.prefixes.front() : std::string()) + t.name, std::move(hf));
  }

  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec || !std::filesystem::is_directory(output_dir))
    throw InputError(fmt::format("cannot create the HF export directory '{}': {}", output_dir,
                                 ec ? ec.message() : "exists and is not a directory"));
  const std::string weights = (std::filesystem::path(output_dir) / "model.safetensors").string();
  write_safetensors(weights, out, {{"format", "pt"}});
  write_file_atomically((std::filesystem::path(output_dir) / "config.json").string(), config_text);
  write_file_atomically((std::filesystem::path(output_dir) / "generation_config.json").string(),
                        hf_generation_config_json(eod_id));
  // An earlier sharded save here would be read instead of this one by tools that follow the index
  // (vLLM's loader does): remove it once this save is complete, as transformers' save_pretrained does.
  const std::vector<std::string> removed = remove_sharded_weights(output_dir);
  if (!removed.empty())
    spdlog::warn("export: removed an earlier sharded save from '{}' so that nothing loads it instead: {}", output_dir,
                 fmt::join(removed, ", "));
  spdlog::info("exported {} {} tensors to '{}'", out.size(), m.family_name, output_dir);
}

}  // namespace lattice
