// Parsing, --set overrides and validation of the JSON run configuration, driven by the schema
// (config_schema.h). Every mistake is an InputError (exit code 2) naming the file and the dotted field.
#include "trainer/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "data/gpt_dataset.h"
#include "data/utf8.h"
#include "kernels/error.h"
#include "kernels/fnv1a.h"
#include "parallel/grid.h"
#include "trainer/config_aliases.h"
#include "trainer/config_schema.h"

namespace lattice {

using nlohmann::json;

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> q;
  for (const auto& s : items) q.push_back("'" + s + "'");
  return join(q);
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// The checks that tie keys together fail with "{source}: {message}".
struct SourceError {
  const std::string& source;
  [[noreturn]] void fail(const std::string& message) const { throw InputError(source + ": " + message); }
};

// The first section other than `except`, in alphabetical order, that has `key` ("seed": "data", before
// "training"); "" when none has it.
std::string section_with_key(const std::string& key, const std::string& except = "") {
  std::vector<std::string> sections = config_sections();
  std::sort(sections.begin(), sections.end());
  for (const std::string& sec : sections)
    if (sec != except && contains(config_keys(sec), key)) return sec;
  return "";
}

// Message for a key that is not in `section` (or a section name that is not known when
// section is empty): a close spelling, or the same key in another section, or the known keys.
std::string unknown_key_message(const std::string& section, const std::string& key) {
  const std::vector<std::string>& sections = config_sections();
  // Another framework's name for a key: name lattice's, before a guess by spelling (num_heads is
  // closer to num_kv_heads than to num_attention_heads).
  if (const std::optional<ForeignName> foreign = foreign_name(key)) {
    if (foreign->key.empty())
      return fmt::format("unknown {} '{}': {} '{}' has no lattice counterpart; {}", section.empty() ? "section" : "key",
                         section.empty() ? key : section + "." + key, foreign->from, key, foreign->note);
    return fmt::format("unknown {} '{}'; did you mean '{}'? ('{}' is {} name for it{})",
                       section.empty() ? "section" : "key", section.empty() ? key : section + "." + key,
                       foreign->key, key, foreign->from, foreign->note.empty() ? "" : "; " + foreign->note);
  }
  if (section.empty()) {
    std::string msg = fmt::format("unknown section '{}'", key);
    const std::string hint = closest_match(key, sections);
    if (!hint.empty()) return msg + fmt::format("; did you mean '{}'?", hint);
    // A key of some section written at the top level.
    if (const std::string sec = section_with_key(key); !sec.empty())
      return msg + fmt::format("; did you mean '{}.{}'? ('{}' belongs in the \"{}\" section)", sec, key, key, sec);
    return msg + "; the sections are " + quoted_list(sections);
  }
  const auto& keys = config_keys(section);
  std::string msg = fmt::format("unknown key '{}.{}'", section, key);
  if (key == "device")
    return msg + "; device is a top-level value of the config, {\"device\": \"cuda\"} (--set device=cuda), not a "
                 "key of a section";
  // The exact key of another section before a near spelling here: training.save_interval is
  // checkpoint.save_interval, not training.sample_interval.
  if (const std::string sec = section_with_key(key, section); !sec.empty())
    return msg + fmt::format("; did you mean '{}.{}'? ('{}' belongs in the \"{}\" section)", sec, key, key, sec);
  const std::string hint = closest_match(key, keys);
  if (!hint.empty()) return msg + fmt::format("; did you mean '{}'?", hint);
  return msg + "; the keys of \"" + section + "\" are " + quoted_list(keys);
}

void check_keys(const std::string& source, const json& section, const std::string& name) {
  if (!section.is_object())
    throw InputError(fmt::format("{}: \"{}\" must be an object {{...}}, got {}", source, name, describe_json(section)));
  for (const auto& item : section.items())
    if (!contains(config_keys(name), item.key()))
      throw InputError(source + ": " + unknown_key_message(name, item.key()));
}

// ---------------------------------------------------------------------------------------------
// What the schema's per-key rules cannot say: defaults and rules that tie keys of one section together.

// The arch preset and the defaults derived from other keys, for the keys `sec` does not give. Runs
// after the keys' own checks, so that hidden_size and num_attention_heads are valid here.
void resolve_model_defaults(ModelConfig& m, const json& sec) {
  const auto absent = [&](const char* key) { return !sec.contains(key); };
  const bool gpt2 = m.arch == Arch::kGpt2;
  if (absent("norm")) m.norm = gpt2 ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  if (absent("activation")) m.activation = gpt2 ? Activation::kGelu : Activation::kSwiglu;
  if (absent("position_embedding"))
    m.position_embedding = gpt2 ? PositionEmbedding::kLearned : PositionEmbedding::kRope;
  if (absent("bias")) m.bias = gpt2;
  if (absent("tie_embeddings")) m.tie_embeddings = gpt2;
  if (absent("num_kv_heads")) m.num_kv_heads = m.num_attention_heads;
  if (absent("ffn_hidden_size"))
    m.ffn_hidden_size = m.activation == Activation::kSwiglu ? default_swiglu_ffn_hidden_size(m.hidden_size)
                                                            : 4 * m.hidden_size;
}

void check_model(const std::string& source, const ModelConfig& m) {
  const SourceError c{source};
  if (m.hidden_size % m.num_attention_heads != 0)
    c.fail(fmt::format("model.hidden_size ({}) must be divisible by model.num_attention_heads ({}): "
                       "each head gets hidden_size / num_attention_heads dimensions",
                       m.hidden_size, m.num_attention_heads));
  if (m.num_attention_heads % m.num_kv_heads != 0)
    c.fail(fmt::format("model.num_attention_heads ({}) must be a multiple of model.num_kv_heads ({}): "
                       "each key/value head serves a whole group of query heads",
                       m.num_attention_heads, m.num_kv_heads));
  if (m.position_embedding == PositionEmbedding::kRope && m.head_dim() % 2 != 0)
    c.fail(fmt::format("model.position_embedding \"rope\" needs an even head dimension, but "
                       "model.hidden_size / model.num_attention_heads = {} / {} = {}",
                       m.hidden_size, m.num_attention_heads, m.head_dim()));
  if (m.recompute_num_layers > 0 && m.recompute != Recompute::kFull)
    c.fail(fmt::format("model.recompute_num_layers ({}) is used only by model.recompute \"full\", but "
                       "model.recompute is \"{}\"",
                       m.recompute_num_layers, recompute_name(m.recompute)));
}

// The rest of `section` once its keys are read and checked.
void finish_section(const std::string& source, const std::string& section, const json& sec, Config& cfg) {
  const SourceError c{source};
  if (section == "model") {
    resolve_model_defaults(cfg.model, sec);
    check_model(source, cfg.model);
  } else if (section == "data") {
    if (!cfg.data.path.empty() && !cfg.data.blend.empty())
      c.fail("data.path and data.blend are both set: set exactly one of them (data.path for one dataset, "
             "data.blend to mix several)");
  } else if (section == "parallel") {
    const ParallelConfig& p = cfg.parallel;
    if (p.overlap_param_gather && !p.distributed_optimizer)
      c.fail("parallel.overlap_param_gather = true needs parallel.distributed_optimizer = true (it overlaps the "
             "distributed optimizer's parameter all-gather with the next forward); set "
             "parallel.distributed_optimizer to true or parallel.overlap_param_gather to false");
  }
}

// Reads one section (or the top-level value "device") of `doc` into `cfg`: its keys, their checks, then
// finish_section. A section that is not in `doc` keeps its defaults.
void parse_section(const std::string& source, const json& doc, const std::string& section, Config& cfg) {
  static const json kEmpty = json::object();
  const bool present = doc.contains(section);
  const json& sec = present ? doc.at(section) : kEmpty;
  const bool is_value = config_keys(section).empty();
  if (present && !is_value) check_keys(source, sec, section);
  for (const ConfigField& f : config_schema()) {
    if (f.section != section) continue;
    if (is_value ? present : sec.contains(f.key)) f.read(is_value ? sec : sec.at(f.key), cfg, {source, f.name()});
  }
  for (const ConfigField& f : config_schema())
    if (f.section == section && f.check) f.check(cfg, {source, f.name()});
  finish_section(source, section, sec, cfg);
}

// Every size is valid alone, but their products must fit the accounting (int64 bytes and FLOPs)
// and the kernels' int64 offsets: beyond 2^53 parameters, or values of one micro-batch's
// activations, no process could hold the model, and the figures would overflow into nonsense.
void check_model_size(const SourceError& c, const ModelConfig& m, int64_t micro_batch_size) {
  const double H = double(m.hidden_size), F = double(m.ffn_hidden_size), L = double(m.num_layers),
               V = double(m.vocab_size), T = double(m.seq_length), B = double(micro_batch_size);
  const double params = V * H + T * H + L * (4 * H * H + 3 * H * F);
  const double activations = B * T * (L * (16 * H + 3 * F) + V);  // the order of what a layer keeps, and the logits
  constexpr double kLimit = 9007199254740992.0;                    // 2^53
  if (params > kLimit || activations > kLimit)
    c.fail(fmt::format("model.num_layers ({}), model.hidden_size ({}), model.ffn_hidden_size ({}), model.vocab_size "
                       "({}), model.seq_length ({}) and training.micro_batch_size ({}) make about {:.3g} parameters "
                       "and {:.3g} activation values per micro-batch, beyond what one process can address (2^53 = "
                       "{:.3g}); check these sizes for a typo",
                       m.num_layers, m.hidden_size, m.ffn_hidden_size, m.vocab_size, m.seq_length, micro_batch_size,
                       params, activations, kLimit));
}

// Cross-section consistency.
void check_consistency(const std::string& source, const Config& cfg) {
  const SourceError c{source};
  const TrainingConfig& t = cfg.training;
  // parallel.data = 0 (inferred) needs the world size: validate_layout checks it then.
  const int64_t data = std::max<int64_t>(cfg.parallel.data, 1);
  int64_t per_step = 0;  // a product past 2^63 exceeds any global batch: not a divisor either
  if (__builtin_mul_overflow(t.micro_batch_size, data, &per_step) || t.global_batch_size % per_step != 0) {
    if (data == 1)
      c.fail(fmt::format("training.global_batch_size ({}) must be a multiple of training.micro_batch_size ({})",
                         t.global_batch_size, t.micro_batch_size));
    c.fail(fmt::format("training.global_batch_size ({}) must be a multiple of training.micro_batch_size ({}) "
                       "x parallel.data ({})",
                       t.global_batch_size, t.micro_batch_size, cfg.parallel.data));
  }
  // After resolve_run_dir: logging.run_dir gives checkpoint.dir a default.
  const CheckpointConfig& k = cfg.checkpoint;
  if (k.save_interval > 0 && k.dir.empty())
    c.fail(fmt::format("checkpoint.save_interval = {} needs checkpoint.dir: set checkpoint.dir to the directory "
                       "that receives iter_*/ and latest (or logging.run_dir, which puts it in RUN_DIR/checkpoints)",
                       k.save_interval));
  check_model_size(c, cfg.model, t.micro_batch_size);
  const OptimizerConfig& o = cfg.optimizer;
  if (o.decay_iters > 0) {
    if (o.warmup_iters > o.decay_iters)
      c.fail(fmt::format("optimizer.warmup_iters ({}) must be <= optimizer.decay_iters ({})", o.warmup_iters,
                         o.decay_iters));
  } else if (o.warmup_iters > t.train_iters) {
    c.fail(fmt::format("optimizer.warmup_iters ({}) must be <= training.train_iters ({}) "
                       "(optimizer.decay_iters is 0, so the schedule spans train_iters)",
                       o.warmup_iters, t.train_iters));
  }
  if (cfg.parallel.backend == CommBackend::kNccl && cfg.device != "cuda")
    c.fail(fmt::format("parallel.backend is \"nccl\" but device is \"{}\": NCCL carries CUDA tensors only; set "
                       "parallel.backend to \"auto\" or \"mpi\" (MPI on the CPU), or device to \"cuda\"",
                       cfg.device));
  const LoggingConfig& g = cfg.logging;
  if (g.profile_step_start > 0 || g.profile_step_end > 0) {
    if (g.profile_step_start == 0 || g.profile_step_end < g.profile_step_start)
      c.fail(fmt::format("logging.profile_step_start ({}) and logging.profile_step_end ({}) must both be set, "
                         "start <= end: the steps start..end run between cudaProfilerStart and cudaProfilerStop",
                         g.profile_step_start, g.profile_step_end));
    if (g.profile_step_start > t.train_iters)
      c.fail(fmt::format("logging.profile_step_start ({}) is past training.train_iters ({}): no step would be "
                         "captured; choose steps of the run",
                         g.profile_step_start, t.train_iters));
    if (cfg.device != "cuda")
      c.fail(fmt::format("logging.profile_step_start is set but device is \"{}\": the capture range is "
                         "cudaProfilerStart/Stop, for nsys on a GPU; set device to \"cuda\", or unset both keys and "
                         "profile the CPU run whole",
                         cfg.device));
  }
  if (t.eval_interval > 0 && parse_data_split(cfg.data.split)[1] == 0)
    c.fail(fmt::format("training.eval_interval ({}) is set but data.split (\"{}\") gives the validation set "
                       "no documents; give the second part a weight or set eval_interval to 0",
                       t.eval_interval, cfg.data.split));
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string set_hint_for_flag(const std::string& flag) {
  std::string name = flag.substr(flag.find_first_not_of('-'));
  name = name.substr(0, name.find('='));
  std::replace(name.begin(), name.end(), '-', '_');
  if (const std::optional<ForeignName> foreign = foreign_name(name)) {
    if (foreign->key.empty())
      return fmt::format("{} '{}' has no lattice counterpart; {}", foreign->from, name, foreign->note);
    return fmt::format("config keys are set in the config file or with --set: --set {}=VALUE ({} name for it{})",
                       foreign->key, foreign->from, foreign->note.empty() ? "" : "; " + foreign->note);
  }
  if (const std::string sec = section_with_key(name); !sec.empty())
    return fmt::format("config keys are set in the config file or with --set: --set {}.{}=VALUE", sec, name);
  return "";
}

// -----------------------------------------------------------------------------------------------

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A typo: a couple of edits, more for long words; never more than half the word.
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  if (best.empty() || best_d > limit || best_d * 2 > std::max(word.size(), best.size())) return "";
  return best;
}

int64_t default_swiglu_ffn_hidden_size(int64_t hidden_size) {
  const int64_t raw = 8 * hidden_size / 3;
  return (raw + 255) / 256 * 256;
}

const char* decay_style_name(DecayStyle d) {
  switch (d) {
    case DecayStyle::kCosine: return "cosine";
    case DecayStyle::kLinear: return "linear";
    case DecayStyle::kConstant: return "constant";
  }
  return "?";
}

const char* precision_name(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

const char* fusion_name(Fusion g) {
  switch (g) {
    case Fusion::kOn: return "true";
    case Fusion::kOff: return "false";
    case Fusion::kAuto: break;
  }
  return "auto";
}

const char* comm_backend_name(CommBackend b) {
  switch (b) {
    case CommBackend::kAuto: return "auto";
    case CommBackend::kNccl: return "nccl";
    case CommBackend::kMpi: return "mpi";
  }
  return "?";
}

DType precision_dtype(Precision p) { return p == Precision::kBf16 ? DType::kBF16 : DType::kF32; }

const std::array<RunDirOutput, 4>& run_dir_outputs() {
  static const std::array<RunDirOutput, 4> outputs{{
      {"logging", "metrics_file", "metrics.jsonl", [](Config& c) -> std::string& { return c.logging.metrics_file; }},
      {"logging", "tensorboard_dir", "tensorboard",
       [](Config& c) -> std::string& { return c.logging.tensorboard_dir; }},
      {"logging", "trace_file", "trace.json", [](Config& c) -> std::string& { return c.logging.trace_file; }},
      {"checkpoint", "dir", "checkpoints", [](Config& c) -> std::string& { return c.checkpoint.dir; }},
  }};
  return outputs;
}

void resolve_run_dir(Config& config) {
  const std::string& run_dir = config.logging.run_dir;
  if (run_dir.empty()) return;
  for (const RunDirOutput& o : run_dir_outputs()) {
    std::string& path = o.field(config);
    if (path.empty()) path = (std::filesystem::path(run_dir) / o.name).string();
  }
}

std::vector<double> parse_data_split(const std::string& split, const std::string& field) {
  // The syntax is data/'s (it cuts the documents); config adds that training needs a train share.
  const std::array<double, 3> w = parse_split_weights(split, field);
  if (!(w[0] > 0))
    throw InputError(fmt::format("{} \"{}\": the train weight (the first) must be > 0", field, split));
  const double total = w[0] + w[1] + w[2];
  return {w[0] / total, w[1] / total, w[2] / total};
}

std::string override_key(const std::string& o) { return trim(o.substr(0, o.find('='))); }

namespace {

// The --set KEY=VALUE overrides whose KEY `message` names, joined with ", "; empty when none.
std::string overrides_named_in(const std::string& message, const std::vector<std::string>& overrides) {
  const auto word = [&](size_t i) {
    return i < message.size() && (std::isalnum(static_cast<unsigned char>(message[i])) || message[i] == '_');
  };
  std::string named;
  for (const std::string& o : overrides) {
    const std::string key = override_key(o);
    if (key.empty()) continue;
    for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1)) {
      // The key alone, not part of a longer one (optimizer.lr in optimizer.lr_x or x.optimizer.lr); a
      // sentence's full stop may follow it.
      const size_t end = at + key.size();
      const bool starts = at == 0 || !(word(at - 1) || message[at - 1] == '.');
      const bool ends = !word(end) && !(end < message.size() && message[end] == '.' && word(end + 1));
      if (starts && ends) {
        named += (named.empty() ? "--set " : ", --set ") + o;
        break;
      }
    }
  }
  return named;
}

}  // namespace

void apply_overrides(json& doc, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    const std::string where = fmt::format("--set {}", o);
    if (eq == std::string::npos)
      throw InputError(fmt::format("{}: malformed override, expected KEY=VALUE such as model.num_layers=4", where));
    const std::string path = override_key(o);
    const std::string raw = o.substr(eq + 1);
    if (path.empty()) throw InputError(fmt::format("{}: malformed override, the key before '=' is empty", where));
    const auto dot = path.find('.');
    const std::string section = path.substr(0, dot);
    if (!contains(config_sections(), section))
      throw InputError(fmt::format("{}: {}", where, unknown_key_message("", section)));
    // A config is JSON, which is UTF-8: other bytes could not be printed or saved with it later.
    if (const size_t bad = find_invalid_utf8(raw); bad != std::string::npos)
      throw InputError(fmt::format("{}: the value is not valid UTF-8 (byte {} of it)", where, bad));
    json value;
    if (const ConfigField* field = find_config_field(path); field != nullptr && field->text) {
      // Only a quoted JSON string is parsed; anything else is the string itself.
      value = raw;
      if (raw.size() >= 2 && raw.front() == '"') {
        try {
          json parsed = json::parse(raw);
          if (parsed.is_string()) value = parsed;
        } catch (const json::exception&) {
        }
      }
    } else {
      try {
        value = json::parse(raw);
      } catch (const json::out_of_range&) {
        // 1e400: a number, but beyond a double (nlohmann refuses it rather than give inf).
        throw InputError(fmt::format("{}: {} is out of range: numbers must be finite doubles, below about 1.8e308 "
                                     "in magnitude",
                                     where, raw));
      } catch (const json::exception&) {
        value = raw;
      }
    }
    if (!doc.is_object()) throw InputError(fmt::format("{}: the config's top level is not an object", where));
    if (section == "device") {
      if (dot != std::string::npos)
        throw InputError(fmt::format("{}: 'device' is a plain value, not a section; use --set device=cpu", where));
      doc["device"] = value;
      continue;
    }
    if (dot == std::string::npos)
      throw InputError(fmt::format("{}: '{}' is a section; name a key in it such as {}.{}=...", where, section,
                                   section, config_keys(section).front()));
    const std::string key = path.substr(dot + 1);
    if (!contains(config_keys(section), key))
      throw InputError(fmt::format("{}: {}", where, unknown_key_message(section, key)));
    if (doc.contains(section) && !doc[section].is_object())
      throw InputError(fmt::format("{}: \"{}\" in the config is not an object", where, section));
    doc[section][key] = value;
  }
}

Config parse_config(const json& doc, const std::string& source) {
  if (!doc.is_object())
    throw InputError(
        fmt::format("{}: the top level must be a JSON object {{...}}, got {}", source, describe_json(doc)));
  for (const auto& item : doc.items())
    if (!contains(config_sections(), item.key())) throw InputError(source + ": " + unknown_key_message("", item.key()));
  Config cfg;
  for (const std::string& section : config_sections()) parse_section(source, doc, section, cfg);
  resolve_run_dir(cfg);
  check_consistency(source, cfg);
  return cfg;
}

namespace {

// A run folder's config.json (run_dir.cc) gives every model key its resolved value, the defaults
// that other keys derive included: a --set of hidden_size, num_attention_heads, activation or arch
// leaves those as they were, where the config the run was made from would derive new ones. Warns
// naming each, with the value it would take.
void warn_on_fixed_defaults(const std::string& path, const json& file_doc, const std::vector<std::string>& overrides,
                            const Config& config) {
  namespace fs = std::filesystem;
  if (overrides.empty() || !file_doc.contains("logging") || !file_doc["logging"].is_object() ||
      !file_doc.contains("model") || !file_doc["model"].is_object())
    return;
  const std::string run_dir = file_doc["logging"].value("run_dir", "");
  const fs::path folder = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  std::error_code ec;
  if (run_dir.empty() || !fs::equivalent(folder, run_dir, ec)) return;
  static const std::vector<std::string> derived = {"norm", "activation", "position_embedding", "bias",
                                                   "tie_embeddings", "num_kv_heads", "ffn_hidden_size"};
  std::set<std::string> given;
  for (const std::string& o : overrides) given.insert(override_key(o));
  json stripped = file_doc;
  for (const std::string& key : derived)
    if (given.count("model." + key) == 0) stripped["model"].erase(key);
  apply_overrides(stripped, overrides);
  Config derived_anew;
  try {
    derived_anew = parse_config(stripped, path);
  } catch (const InputError&) {
    return;  // the defaults derived anew would not even be valid: nothing to suggest
  }
  const json kept = config_to_json(config)["model"], fresh = config_to_json(derived_anew)["model"];
  std::vector<std::string> fixed;
  for (const std::string& key : derived)
    if (kept[key] != fresh[key])
      fixed.push_back(fmt::format("model.{} stays {} (derived anew: {})", key, kept[key].dump(), fresh[key].dump()));
  if (!fixed.empty())
    spdlog::warn("{} is a run folder's config.json, which fixes every model key at its resolved value: with these "
                 "--set, {}; --set those too, or start from the config the run was made from",
                 path, fmt::join(fixed, ", "));
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(fmt::format("config file '{}' not found (ready configs are in configs/, e.g. "
                                 "configs/quickstart.json)",
                                 path));
  if (fs::is_directory(path, ec)) throw InputError(fmt::format("config file '{}' is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("config file '{}' cannot be read", path));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  json doc;
  // A key given twice in one object is almost always an edit mistake (the last one would win
  // silently): the parser callback keeps the keys seen per open object.
  std::vector<std::pair<std::set<std::string>, std::string>> open;  // (keys seen, current key)
  const json::parser_callback_t callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!open.back().first.insert(key).second) {
        std::string dotted;
        for (size_t i = 0; i + 1 < open.size(); ++i) dotted += open[i].second + ".";
        throw InputError(fmt::format("{}: key '{}{}' is given twice; keep one", path, dotted, key));
      }
      open.back().second = key;
    }
    return true;
  };
  try {
    doc = json::parse(text, callback);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the character where parsing failed.
    const size_t pos = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < pos; ++i)
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    const size_t column = pos - line_start + 1;
    std::string detail = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..." -> "syntax error ..."
    const auto colon = detail.find(": ");
    if (detail.rfind("[json.exception", 0) == 0 && colon != std::string::npos) detail = detail.substr(colon + 2);
    throw InputError(fmt::format("{}:{}:{}: invalid JSON (line {}, column {}): {}", path, line, column, line, column,
                                 detail));
  } catch (const json::out_of_range& e) {
    // A number beyond a double (1e400) is nlohmann's out_of_range 406, not a parse_error, and comes
    // without a position: "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string detail = e.what();
    const auto close = detail.find("] ");
    if (detail.rfind("[json.exception", 0) == 0 && close != std::string::npos) detail = detail.substr(close + 2);
    throw InputError(fmt::format("{}: invalid JSON: {}: numbers must be finite doubles, below about 1.8e308 in "
                                 "magnitude",
                                 path, detail));
  }
  const json file_doc = doc;
  apply_overrides(doc, overrides);
  try {
    Config config = parse_config(doc, path);
    warn_on_fixed_defaults(path, file_doc, overrides, config);
    return config;
  } catch (const InputError& e) {
    // The message names the file; when a --set gave the value it names, say so, or the user looks
    // for it in the file.
    const std::string given = overrides_named_in(e.what(), overrides);
    const std::string message = e.what();
    if (given.empty() || message.rfind(path + ": ", 0) != 0) throw;
    throw InputError(fmt::format("{} with {}: {}", path, given, message.substr(path.size() + 2)));
  }
}

std::string config_hash(const Config& config) {
  return fmt::format("{:016x}", fnv1a_64(config_to_json(config).dump()));
}

json config_to_json(const Config& c) {
  json j;
  for (const ConfigField& f : config_schema()) (f.key.empty() ? j[f.section] : j[f.section][f.key]) = f.write(c);
  return j;
}

ParallelLayout validate_layout(const Config& config, int world_size) {
  const ParallelConfig& pc = config.parallel;
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  if (world_size < 1) throw InputError(fmt::format("the world size must be at least 1 (got {})", world_size));
  ParallelLayout L;
  L.world_size = world_size;
  L.tensor = static_cast<int>(pc.tensor);
  L.pipeline = static_cast<int>(pc.pipeline);
  L.virtual_stages = static_cast<int>(pc.virtual_stages);
  L.schedule = pc.schedule;
  L.data_inferred = pc.data == 0;
  const int64_t tp = pc.tensor, pp = pc.pipeline, v = pc.virtual_stages;
  if (L.data_inferred && tp * pp > world_size)
    throw InputError(fmt::format(
        "the job has {} ranks, fewer than parallel.tensor × parallel.pipeline = {} × {} = {}: change "
        "parallel.tensor or parallel.pipeline, or run a multiple of {} ranks",
        world_size, tp, pp, tp * pp, tp * pp));
  // RankGrid owns the world = tensor × pipeline × data rule and its messages.
  const RankGrid grid(world_size, 0, L.tensor, L.pipeline, static_cast<int>(pc.data));
  L.data = grid.dp_size();
  if (t.sample_interval > 0 && world_size > 1)
    throw InputError(fmt::format(
        "training.sample_interval = {} needs one process, but the layout has {} ranks: samples are drawn from the "
        "whole model in one process; set training.sample_interval to 0 and sample a checkpoint of the run with "
        "`lattice generate --checkpoint DIR` instead",
        t.sample_interval, world_size));

  if (m.num_attention_heads % tp != 0)
    throw InputError(fmt::format(
        "model.num_attention_heads ({}) must be divisible by parallel.tensor ({}): each tensor-parallel rank "
        "holds whole attention heads; change parallel.tensor or model.num_attention_heads",
        m.num_attention_heads, tp));
  if (m.num_kv_heads % tp != 0)
    throw InputError(fmt::format(
        "model.num_kv_heads ({}) must be divisible by parallel.tensor ({}): each tensor-parallel rank holds "
        "whole kv heads; change parallel.tensor or model.num_kv_heads",
        m.num_kv_heads, tp));
  if (m.ffn_hidden_size % tp != 0)
    throw InputError(fmt::format(
        "model.ffn_hidden_size ({}) must be divisible by parallel.tensor ({}): the MLP's columns are split "
        "evenly across the tensor-parallel ranks; change parallel.tensor or model.ffn_hidden_size",
        m.ffn_hidden_size, tp));
  const int64_t vocab_multiple = 128 * tp;
  L.padded_vocab_size = tp > 1 ? (m.vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple : m.vocab_size;
  if (pc.sequence_parallel) {
    if (tp < 2)
      throw InputError(
          "parallel.sequence_parallel = true needs parallel.tensor > 1 (it splits the sequence across the "
          "tensor-parallel ranks); set parallel.tensor to 2 or more, or parallel.sequence_parallel to false");
    if (m.seq_length % tp != 0)
      throw InputError(fmt::format(
          "model.seq_length ({}) must be divisible by parallel.tensor ({}) with parallel.sequence_parallel: "
          "each tensor-parallel rank holds seq_length / tensor positions; change model.seq_length or "
          "parallel.tensor, or set parallel.sequence_parallel to false",
          m.seq_length, tp));
  }

  int64_t per_step = 0;
  const bool past_int64 = __builtin_mul_overflow(t.micro_batch_size, static_cast<int64_t>(L.data), &per_step);
  const std::string data_note =
      L.data_inferred ? fmt::format(" (inferred: {} ranks / (tensor {} × pipeline {}))", world_size, tp, pp) : "";
  if (past_int64 || t.global_batch_size % per_step != 0 || t.global_batch_size / per_step < 1)
    throw InputError(fmt::format(
        "the micro-batches per step, training.global_batch_size / (training.micro_batch_size × parallel.data) "
        "= {} / ({} × {}{}), must be a whole number >= 1; change training.global_batch_size to a multiple of "
        "{}, or training.micro_batch_size or parallel.data",
        t.global_batch_size, t.micro_batch_size, L.data, data_note,
        past_int64 ? std::string("their product") : std::to_string(per_step)));
  L.micro_batches = t.global_batch_size / per_step;
  if (L.micro_batches > std::numeric_limits<int>::max())
    throw InputError(fmt::format(
        "the micro-batches per step, training.global_batch_size / (training.micro_batch_size × parallel.data) "
        "= {}, is too many; raise training.micro_batch_size",
        L.micro_batches));
  validate_schedule(pc.schedule, L.pipeline, L.virtual_stages, static_cast<int>(L.micro_batches));
  L.bubble = theoretical_bubble(pc.schedule, L.pipeline, L.virtual_stages, static_cast<int>(L.micro_batches));

  const int64_t stages = pp * v;
  if (pc.layers_per_stage.empty()) {
    if (m.num_layers % stages != 0)
      throw InputError(fmt::format(
          "model.num_layers ({}) must be divisible by parallel.pipeline × parallel.virtual_stages = {} × {} = {} "
          "to split the layers evenly; change model.num_layers, parallel.pipeline or parallel.virtual_stages, or "
          "give parallel.layers_per_stage ({} layer counts, one per virtual stage)",
          m.num_layers, pp, v, stages, stages));
    L.layers_per_stage.assign(static_cast<size_t>(stages), m.num_layers / stages);
  } else {
    const auto& lps = pc.layers_per_stage;
    if (static_cast<int64_t>(lps.size()) != stages)
      throw InputError(fmt::format(
          "parallel.layers_per_stage has {} entries but parallel.pipeline × parallel.virtual_stages = {} × {} = {}: "
          "give one layer count per virtual stage (or [] for an even split)",
          lps.size(), pp, v, stages));
    int64_t sum = 0;  // each count at most num_layers: the sum cannot wrap around
    for (size_t i = 0; i < lps.size(); ++i) {
      if (lps[i] > m.num_layers)
        throw InputError(fmt::format("parallel.layers_per_stage[{}] = {} is more than model.num_layers ({})", i,
                                     lps[i], m.num_layers));
      sum += lps[i];
    }
    if (sum != m.num_layers)
      throw InputError(fmt::format(
          "parallel.layers_per_stage sums to {} but model.num_layers is {}: the counts must add up to the "
          "model's layers",
          sum, m.num_layers));
    L.layers_per_stage = lps;
  }
  return L;
}

std::string format_layout(const ParallelLayout& L, const Config& config) {
  const ParallelConfig& pc = config.parallel;
  const TrainingConfig& t = config.training;
  std::string out;
  out += fmt::format("layout: {} ranks = tensor {} × pipeline {} × data {}{} (rank = tp + TP·(dp + DP·pp))\n",
                     L.world_size, L.tensor, L.pipeline, L.data,
                     L.data_inferred ? fmt::format(" (data inferred: {} / ({} × {}))", L.world_size, L.tensor,
                                                   L.pipeline)
                                     : "");
  std::vector<std::string> counts;
  for (int64_t n : L.layers_per_stage) counts.push_back(std::to_string(n));
  out += fmt::format("  pipeline: schedule {}, virtual stages {}, layers per virtual stage [{}]{}\n",
                     schedule_kind_name(L.schedule), L.virtual_stages, join(counts),
                     pc.layers_per_stage.empty() ? " (even split)" : " (parallel.layers_per_stage)");
  out += fmt::format("  micro-batches per step per data-parallel rank: {} (global batch {} = micro-batch {} × {} × "
                     "data {})\n",
                     L.micro_batches, t.global_batch_size, t.micro_batch_size, L.micro_batches, L.data);
  const bool interleaved = L.schedule == ScheduleKind::kInterleaved;
  out += fmt::format("  theoretical pipeline bubble: {:.1f}% ((p-1)/({}m+p-1) with p={}{}, m={})\n", 100 * L.bubble,
                     interleaved ? "v·" : "", L.pipeline, interleaved ? fmt::format(", v={}", L.virtual_stages) : "",
                     L.micro_batches);
  out += fmt::format("  tensor: sequence parallel {}, vocabulary {}{}\n", pc.sequence_parallel ? "on" : "off",
                     config.model.vocab_size,
                     L.tensor > 1 ? fmt::format(" padded to {} (a multiple of 128 × tensor)", L.padded_vocab_size) : "");
  out += fmt::format("  data: gradient buckets {} MB, overlap_grad_reduce {}, distributed_optimizer {}, "
                     "overlap_param_gather {}; communication timeout {} s, backend {}\n",
                     pc.bucket_size_mb, pc.overlap_grad_reduce ? "on" : "off",
                     pc.distributed_optimizer ? "on" : "off", pc.overlap_param_gather ? "on" : "off", pc.timeout_s,
                     comm_backend_name(pc.backend));
  return out;
}

int default_world_size(const Config& config) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(value, &end, 10);
    if (errno != 0 || *end != '\0' || n < 1 || n > std::numeric_limits<int>::max())
      throw InputError(fmt::format("{}=\"{}\" (the launcher's world size) is not a positive integer; pass "
                                   "--world-size N",
                                   name, value));
    return static_cast<int>(n);
  }
  const ParallelConfig& p = config.parallel;
  const int64_t n = p.tensor * p.pipeline * std::max<int64_t>(p.data, 1);
  if (n > std::numeric_limits<int>::max())
    throw InputError(fmt::format("parallel.tensor × parallel.pipeline × parallel.data = {} ranks is too many", n));
  return static_cast<int>(n);
}

void check_single_process(const Config& config) {
  const ParallelConfig& p = config.parallel;
  if (p.tensor > 1 || p.pipeline > 1 || p.data > 1)
    throw InputError(fmt::format(
        "parallel.tensor = {}, parallel.pipeline = {}, parallel.data = {}: `lattice bench` runs one process; "
        "set tensor = pipeline = data = 1, or measure a parallel layout with `mpirun -np N lattice train` (it "
        "prints tokens/s, the pipeline bubble and the hidden share of data-parallel communication)",
        p.tensor, p.pipeline, p.data));
}

void check_one_process_layout(const Config& config) {
  const ParallelConfig& p = config.parallel;
  const int64_t ranks = p.tensor * p.pipeline * std::max<int64_t>(p.data, 1);
  if (ranks > 1)
    throw InputError(fmt::format(
        "parallel.tensor × parallel.pipeline × parallel.data = {} × {} × {} needs {} ranks, but `lattice train` "
        "was started as one process: launch it with `mpirun -np {} lattice train ...` (or `srun --ntasks={}`), or "
        "set the degrees to 1",
        p.tensor, p.pipeline, std::max<int64_t>(p.data, 1), ranks, ranks, ranks));
}

std::vector<std::pair<std::string, std::string>> dataset_prefixes(const DataConfig& data) {
  std::vector<std::pair<std::string, std::string>> prefixes;
  if (!data.path.empty()) prefixes.emplace_back("data.path", data.path);
  for (size_t i = 0; i < data.blend.size(); ++i)
    prefixes.emplace_back(fmt::format("data.blend[{}][1]", i), data.blend[i].prefix);
  return prefixes;
}

void check_dataset_files_exist(const DataConfig& data) {
  namespace fs = std::filesystem;
  for (const auto& [field, prefix] : dataset_prefixes(data)) {
    for (const char* ext : {".bin", ".idx"}) {
      const std::string file = prefix + ext;
      std::error_code ec;
      if (!fs::is_regular_file(file, ec))
        throw InputError(fmt::format("{} \"{}\": dataset file '{}' not found; {} is a prefix "
                                     "(PREFIX.bin + PREFIX.idx); create the dataset with `lattice data prepare`",
                                     field, prefix, file, field));
    }
  }
}

void validate_for_training(const Config& config, int world_size, bool check_init_from) {
  namespace fs = std::filesystem;
  validate_layout(config, world_size);
  const std::string& path = config.data.path;
  if (path.empty() && config.data.blend.empty())
    throw InputError(
        "data.path is required for training (or data.blend): set data.path to a dataset prefix (PREFIX.bin + "
        "PREFIX.idx, a Megatron indexed dataset) or data.blend to [[weight, prefix], ...]; make one from text "
        "with `lattice data prepare`");
  if (!path.empty() && !config.data.blend.empty())
    throw InputError("data.path and data.blend are both set: set exactly one of them");
  check_dataset_files_exist(config.data);
  if (check_init_from) check_init_from_exists(config.model);
}

Config with_absolute_paths(Config c) {
  const auto absolute = [](std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::absolute(path, ec);
    if (!ec) path = p.lexically_normal().string();
  };
  absolute(c.data.path);
  for (BlendEntry& e : c.data.blend) absolute(e.prefix);
  absolute(c.model.init_from);
  absolute(c.checkpoint.dir);
  if (c.checkpoint.load != "auto" && c.checkpoint.load != "none") absolute(c.checkpoint.load);
  for (std::string* path : {&c.logging.run_dir, &c.logging.metrics_file, &c.logging.tensorboard_dir,
                            &c.logging.trace_file, &c.training.gemm_autotune_dir})
    absolute(*path);
  return c;
}

std::vector<std::string> config_warnings(const Config& config, const ParallelLayout& layout) {
  std::vector<std::string> warnings;
  const OptimizerConfig& o = config.optimizer;
  const int64_t train_iters = config.training.train_iters;
  if (o.warmup_iters > train_iters)
    warnings.push_back(fmt::format(
        "optimizer.warmup_iters ({}) is past training.train_iters ({}): the run ends in warmup at lr {:.3g}, never "
        "reaching optimizer.lr ({:.3g}); shorten the warmup, or lengthen training.train_iters (split a long run "
        "into jobs with training.exit_interval)",
        o.warmup_iters, train_iters,
        o.lr * static_cast<double>(train_iters) / static_cast<double>(o.warmup_iters), o.lr));
  // Set for another layout of a sweep, most likely: say that this one does without them.
  if (layout.data == 1 && config.parallel.distributed_optimizer)
    warnings.push_back("parallel.distributed_optimizer has no effect with one data-parallel rank: nothing to shard");
  if (layout.data == 1 && config.parallel.grad_reduce_dtype != Precision::kFp32)
    warnings.push_back(fmt::format("parallel.grad_reduce_dtype {} has no effect with one data-parallel rank: no "
                                   "gradient is reduced",
                                   precision_name(config.parallel.grad_reduce_dtype)));
  // Megatron's block method counts per pipeline stage too; a whole-model count recomputes everything.
  const ModelConfig& m = config.model;
  const int64_t largest_chunk = *std::max_element(layout.layers_per_stage.begin(), layout.layers_per_stage.end());
  if (m.recompute == Recompute::kFull && m.recompute_num_layers > largest_chunk)
    warnings.push_back(fmt::format(
        "model.recompute_num_layers ({}) is more than any model chunk's {} layer(s): it counts the first layers of "
        "each model chunk (one per pipeline stage and virtual stage), not of the whole model, so every layer is "
        "recomputed, as with 0",
        m.recompute_num_layers, largest_chunk));
  return warnings;
}

void check_init_from_exists(const ModelConfig& model) {
  if (model.init_from.empty()) return;
  std::error_code ec;
  // A directory's contents (model.safetensors, or an index and its shards) are checked when loading.
  if (!std::filesystem::is_regular_file(model.init_from, ec) && !std::filesystem::is_directory(model.init_from, ec))
    throw InputError(fmt::format("model.init_from: '{}' not found; give a Hugging Face safetensors file or a model "
                                 "directory (model.safetensors, or model.safetensors.index.json and its shards)",
                                 model.init_from));
}

}  // namespace lattice
