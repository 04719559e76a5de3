// Config parsing: every class of mistake is an InputError (exit code 2) naming the field;
// presets, --set overrides and the config_to_json round trip.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "trainer/config.h"
#include "trainer/config_aliases.h"
#include "trainer/config_schema.h"

using namespace lattice;
using nlohmann::json;

namespace {

// A valid small config to start each mistake from.
json base() {
  return json::parse(R"({
    "model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 257, "seq_length": 32},
    "training": {"micro_batch_size": 2, "global_batch_size": 8, "train_iters": 10},
    "optimizer": {"lr": 1e-3, "min_lr": 1e-4, "warmup_iters": 2},
    "data": {"path": "runs/test/data/tiny"},
    "device": "cpu"
  })");
}

// The message of the InputError that parsing `doc` (after `overrides`) throws; fails the test when
// nothing (or another exception type) is thrown.
std::string error_of(json doc, const std::vector<std::string>& overrides = {}) {
  try {
    apply_overrides(doc, overrides);
    parse_config(doc, "test.json");
  } catch (const InputError& e) {
    REQUIRE(e.code() == ExitCode::kBadInput);
    return e.what();
  }
  FAIL("no InputError thrown");
  return "";
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(dir ? dir : std::filesystem::temp_directory_path().string()) / name).string();
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_config(path, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("no InputError thrown");
  return "";
}

using Catch::Matchers::Contains;

}  // namespace

TEST_CASE("the base config parses") { REQUIRE_NOTHROW(parse_config(base(), "test.json")); }

TEST_CASE("unknown keys and sections get a did-you-mean hint") {
  json d = base();
  d["model"]["hiden_size"] = 64;
  const std::string m = error_of(d);
  CHECK_THAT(m, Contains("test.json"));
  CHECK_THAT(m, Contains("model.hiden_size"));
  CHECK_THAT(m, Contains("did you mean 'hidden_size'"));

  d = base();
  d["modle"] = d["model"];
  d.erase("model");
  CHECK_THAT(error_of(d), Contains("unknown section 'modle'") && Contains("did you mean 'model'"));

  d = base();
  d["optimiser"] = json::object();
  CHECK_THAT(error_of(d), Contains("did you mean 'optimizer'"));

  // A key in the wrong section points at the right one.
  d = base();
  d["training"]["lr"] = 0.1;
  CHECK_THAT(error_of(d), Contains("training.lr") && Contains("optimizer.lr"));
  // ... even where a key of this section is spelled nearly like it (sample_interval, eval_interval).
  for (const auto& [wrong, right] : std::vector<std::pair<std::string, std::string>>{
           {"training.save_interval=1", "did you mean 'checkpoint.save_interval'?"},
           {"training.log_interval=1", "did you mean 'logging.log_interval'?"},
           {"training.decay_iters=1", "did you mean 'optimizer.decay_iters'?"},
           {"checkpoint.eval_interval=1", "did you mean 'training.eval_interval'?"}})
    CHECK_THAT(error_of(base(), {wrong}), Contains(right));
  CHECK_THAT(error_of(base(), {"training.device=cuda"}), Contains("device is a top-level value of the config"));
  // Megatron-LM's names of keys lattice has.
  CHECK_THAT(error_of(base(), {"parallel.distributed_timeout_minutes=10"}),
             Contains("did you mean 'parallel.timeout_s'?") && Contains("in seconds"));
  CHECK_THAT(error_of(base(), {"model.group_query_attention=true"}), Contains("did you mean 'model.num_kv_heads'?"));

  // Nothing close: the known keys are listed.
  d = base();
  d["logging"]["zzzzzzzz"] = 1;
  CHECK_THAT(error_of(d), Contains("logging.zzzzzzzz") && Contains("'log_interval'") && Contains("'metrics_file'"));

  d = base();
  d["data"]["shufle"] = false;
  CHECK_THAT(error_of(d), Contains("did you mean 'shuffle'"));

  // Megatron-LM's and Hugging Face's names point at lattice's key, before any spelling guess
  // (num_heads is nearer num_kv_heads by spelling).
  d = base();
  d["model"]["num_heads"] = 8;
  CHECK_THAT(error_of(d), Contains("model.num_heads") && Contains("did you mean 'model.num_attention_heads'"));
  d = base();
  d["model"]["max_position_embeddings"] = 2048;
  CHECK_THAT(error_of(d), Contains("did you mean 'model.seq_length'") && Contains("Hugging Face"));
  d = base();
  d["parallel"] = {{"tensor-model-parallel-size", 2}};
  CHECK_THAT(error_of(d), Contains("did you mean 'parallel.tensor'") && Contains("Megatron-LM's name for it"));
  d = base();
  d["tensor_model_parallel_size"] = 2;
  CHECK_THAT(error_of(d), Contains("unknown section 'tensor_model_parallel_size'") &&
                              Contains("did you mean 'parallel.tensor'"));
  d = base();
  d["model"]["untie_embeddings_and_output_weights"] = true;
  CHECK_THAT(error_of(d), Contains("'model.tie_embeddings'") && Contains("with the opposite value"));
  // A Megatron-LM feature lattice lacks is named as lacking, not guessed at by spelling.
  d = base();
  d["model"]["hidden_dropout"] = 0.1;
  CHECK_THAT(error_of(d), Contains("unknown key 'model.hidden_dropout': Megatron-LM's 'hidden_dropout' has no lattice "
                                   "counterpart; lattice trains without dropout"));
  CHECK_THAT(error_of(base(), {"model.attention-dropout=0"}), Contains("lattice trains without dropout"));
}

TEST_CASE("no foreign name is a lattice key: a hint never points away from a key that exists") {
  for (const std::string& section : config_sections())
    for (const std::string& key : config_keys(section)) {
      INFO(section << "." << key);
      CHECK_FALSE(foreign_name(key).has_value());
    }
}

// training.seed and data.seed: the hint names the first such section in alphabetical order, as it did
// before the keys came from the schema (whose order is training before data).
TEST_CASE("a key that two sections have is hinted to the alphabetically first") {
  json d = base();
  d["model"]["seed"] = 1;
  CHECK_THAT(error_of(d), Contains("unknown key 'model.seed'; did you mean 'data.seed'?"));
  d = base();
  d["seed"] = 1;
  CHECK_THAT(error_of(d), Contains("unknown section 'seed'; did you mean 'data.seed'?"));
  CHECK_THAT(error_of(base(), {"parallel.seed=1"}), Contains("did you mean 'data.seed'?"));
}

TEST_CASE("wrong JSON types name the dotted field and the value") {
  json d = base();
  d["model"]["hidden_size"] = "768";
  CHECK_THAT(error_of(d), Contains("model.hidden_size must be an integer, got string \"768\""));

  d = base();
  d["model"]["num_layers"] = 2.5;
  CHECK_THAT(error_of(d), Contains("model.num_layers must be an integer") && Contains("2.5"));

  d = base();
  d["optimizer"]["lr"] = "fast";
  CHECK_THAT(error_of(d), Contains("optimizer.lr must be a number, got string \"fast\""));

  d = base();
  d["data"]["shuffle"] = 1;
  CHECK_THAT(error_of(d), Contains("data.shuffle must be true or false"));

  d = base();
  d["data"]["path"] = 5;
  CHECK_THAT(error_of(d), Contains("data.path must be a string"));

  d = base();
  d["training"]["seed"] = -1;
  CHECK_THAT(error_of(d), Contains("training.seed must be a non-negative integer"));

  d = base();
  d["training"] = json::array();
  CHECK_THAT(error_of(d), Contains("\"training\" must be an object"));

  // An integral float is accepted for an integer field.
  d = base();
  d["training"]["train_iters"] = 1e3;
  REQUIRE(parse_config(d, "t").training.train_iters == 1000);
}

TEST_CASE("numbers out of range say so, not that they are of the wrong type") {
  // 1e20 is an integer, one that does not fit in 64 bits.
  CHECK_THAT(error_of(base(), {"training.train_iters=1e20"}),
             Contains("training.train_iters must be an integer below 2^63, got 1e+20"));
  CHECK_THAT(error_of(base(), {"model.num_layers=-1e19"}),
             Contains("model.num_layers must be an integer at least -2^63, got -1e+19"));
  CHECK_THAT(error_of(base(), {"training.train_iters=18446744073709551615"}),
             Contains("training.train_iters must be an integer below 2^63, got 18446744073709551615"));
  CHECK_THAT(error_of(base(), {"training.seed=1e20"}), Contains("training.seed must be an integer below 2^64, got 1e+20"));
  // 1e400 is a number beyond a double: neither a string nor an unexpected failure.
  const std::string lr = error_of(base(), {"optimizer.lr=1e400"});
  CHECK_THAT(lr, Contains("--set optimizer.lr=1e400: 1e400 is out of range") && !Contains("string"));
  const std::string file = write_file("huge.json", R"({"optimizer": {"lr": 1e400}})");
  CHECK_THAT(load_error(file), Contains("huge.json: invalid JSON: number overflow parsing '1e400'") && Contains("finite doubles"));
}

TEST_CASE("enum values list the allowed ones") {
  json d = base();
  d["model"]["norm"] = "batchnorm";
  CHECK_THAT(error_of(d), Contains("model.norm must be one of layernorm | rmsnorm, got \"batchnorm\""));
  d = base();
  d["model"]["arch"] = "bert";
  CHECK_THAT(error_of(d), Contains("model.arch must be one of gpt2 | llama"));
  d = base();
  d["model"]["activation"] = "relu";
  CHECK_THAT(error_of(d), Contains("model.activation") && Contains("gelu | swiglu"));
  d = base();
  d["model"]["position_embedding"] = "alibi";
  CHECK_THAT(error_of(d), Contains("model.position_embedding") && Contains("learned | rope"));
  d = base();
  d["model"]["recompute"] = "partial";
  CHECK_THAT(error_of(d), Contains("model.recompute") && Contains("none | selective | full"));
  d = base();
  d["model"]["recompute_num_layers"] = -1;
  CHECK_THAT(error_of(d), Contains("model.recompute_num_layers"));
  d["model"]["recompute_num_layers"] = 2;
  CHECK_THAT(error_of(d), Contains("model.recompute_num_layers") && Contains("\"full\""));
  d["model"]["recompute"] = "full";
  CHECK(parse_config(d, "t").model.recompute_num_layers == 2);
  d = base();
  d["optimizer"]["decay"] = "exp";
  CHECK_THAT(error_of(d), Contains("optimizer.decay must be one of cosine | linear | constant"));
  d = base();
  d["training"]["precision"] = "fp16";
  CHECK_THAT(error_of(d), Contains("training.precision must be one of fp32 | bf16, got \"fp16\""));
  d = base();
  d["parallel"]["grad_reduce_dtype"] = "bfloat16";
  CHECK_THAT(error_of(d), Contains("parallel.grad_reduce_dtype must be one of fp32 | bf16"));
}

TEST_CASE("inconsistent fields name both") {
  json d = base();
  d["model"]["num_attention_heads"] = 5;
  CHECK_THAT(error_of(d), Contains("model.hidden_size (64)") && Contains("model.num_attention_heads (5)"));

  d = base();
  d["model"]["num_kv_heads"] = 3;
  CHECK_THAT(error_of(d), Contains("model.num_attention_heads (4)") && Contains("model.num_kv_heads (3)"));

  d = base();
  d["training"]["global_batch_size"] = 7;
  CHECK_THAT(error_of(d), Contains("training.global_batch_size (7)") && Contains("training.micro_batch_size (2)"));

  d = base();
  d["optimizer"]["min_lr"] = 1.0;
  CHECK_THAT(error_of(d), Contains("optimizer.min_lr") && Contains("optimizer.lr"));

  d = base();
  d["optimizer"]["warmup_iters"] = 50;
  CHECK_THAT(error_of(d), Contains("optimizer.warmup_iters (50)") && Contains("training.train_iters (10)"));

  d = base();
  d["optimizer"]["decay_iters"] = 5;
  d["optimizer"]["warmup_iters"] = 6;
  CHECK_THAT(error_of(d), Contains("optimizer.warmup_iters (6)") && Contains("optimizer.decay_iters (5)"));

  // rope needs an even head dimension: 36 / 4 = 9.
  d = base();
  d["model"]["hidden_size"] = 36;
  d["model"]["position_embedding"] = "rope";
  CHECK_THAT(error_of(d), Contains("model.position_embedding") && Contains("model.hidden_size") &&
                              Contains("model.num_attention_heads") && Contains("even"));

  d = base();
  d["training"]["eval_interval"] = 5;
  d["data"]["split"] = "100,0,0";
  CHECK_THAT(error_of(d), Contains("training.eval_interval") && Contains("data.split"));
}

TEST_CASE("out-of-range values name the field") {
  const std::vector<std::pair<std::string, json>> cases = {
      {"model.num_layers", 0},       {"model.hidden_size", -8},      {"model.vocab_size", 1},
      {"model.seq_length", 0},       {"model.norm_eps", 0.0},        {"model.init_std", -0.02},
      {"model.rope_theta", 0},       {"model.ffn_hidden_size", 0},   {"model.num_kv_heads", 0},
      {"training.micro_batch_size", 0}, {"training.train_iters", 0}, {"training.eval_iters", 0},
      {"training.eval_interval", -1}, {"optimizer.lr", -1.0},        {"optimizer.beta1", 1.0},
      {"optimizer.beta2", -0.1},     {"optimizer.eps", 0.0},         {"optimizer.weight_decay", -0.1},
      {"optimizer.grad_clip", -1.0}, {"optimizer.warmup_iters", -1}, {"logging.log_interval", 0},
      {"logging.peak_gflops", -1.0},
      {"data.split", "a,b"},         {"data.split", "1,2,3,4"},      {"data.split", "0,1,0"},
      {"model.num_layers", 65537},   {"model.vocab_size", 2147483648LL},
  };
  for (const auto& [field, value] : cases) {
    INFO(field << " = " << value.dump());
    json d = base();
    const auto dot = field.find('.');
    d[field.substr(0, dot)][field.substr(dot + 1)] = value;
    CHECK_THAT(error_of(d), Contains(field));
  }
}

// The message of the InputError that validate_layout throws for `doc` on `world` ranks.
std::string layout_error_of(json doc, int world, const std::vector<std::string>& overrides = {}) {
  try {
    apply_overrides(doc, overrides);
    validate_layout(parse_config(doc, "test.json"), world);
  } catch (const InputError& e) {
    REQUIRE(e.code() == ExitCode::kBadInput);
    return e.what();
  }
  FAIL("validate_layout accepted a bad layout");
  return "";
}

ParallelLayout layout_of(json doc, int world, const std::vector<std::string>& overrides = {}) {
  apply_overrides(doc, overrides);
  return validate_layout(parse_config(doc, "test.json"), world);
}

TEST_CASE("parallel keys: defaults, types, ranges and enums name the field") {
  const Config c = parse_config(base(), "t");
  CHECK(c.parallel.tensor == 1);
  CHECK(c.parallel.pipeline == 1);
  CHECK(c.parallel.data == 0);  // inferred
  CHECK(c.parallel.virtual_stages == 1);
  CHECK(c.parallel.schedule == ScheduleKind::kOneFOneB);
  CHECK(c.parallel.layers_per_stage.empty());
  CHECK_FALSE(c.parallel.sequence_parallel);
  CHECK(c.parallel.bucket_size_mb == 25);
  CHECK(c.parallel.overlap_grad_reduce);
  CHECK_FALSE(c.parallel.distributed_optimizer);
  CHECK_FALSE(c.parallel.overlap_param_gather);
  CHECK(c.parallel.timeout_s == kDefaultCommTimeoutS);

  const std::vector<std::pair<std::string, json>> cases = {
      {"tensor", 0},           {"tensor", "2"},           {"tensor", 1.5},
      {"pipeline", 0},         {"pipeline", true},        {"data", -1},
      {"data", "x"},           {"virtual_stages", 0},     {"virtual_stages", 2.5},
      {"schedule", "pipedream"}, {"schedule", 1},         {"layers_per_stage", 3},
      {"layers_per_stage", json::array({1, 0})},          {"layers_per_stage", json::array({1, "a"})},
      {"sequence_parallel", 1}, {"bucket_size_mb", 0},    {"bucket_size_mb", -2.5},
      {"bucket_size_mb", "25"}, {"overlap_grad_reduce", "yes"}, {"distributed_optimizer", 0},
      {"overlap_param_gather", "true"}, {"timeout_s", 0}, {"timeout_s", -1},
      {"timeout_s", "600"},    {"tensor", 1 << 20},
  };
  for (const auto& [key, value] : cases) {
    INFO(key << " = " << value.dump());
    json d = base();
    d["parallel"][key] = value;
    CHECK_THAT(error_of(d), Contains("parallel." + key));
  }
  json d = base();
  d["parallel"] = {{"schedule", "interleave"}};
  CHECK_THAT(error_of(d), Contains("parallel.schedule") && Contains("\"interleaved\""));
  d = base();
  d["parallel"] = {{"layers_per_stage", json::array({1, 0})}};
  CHECK_THAT(error_of(d), Contains("parallel.layers_per_stage[1]"));
  // Did-you-mean for the new keys.
  CHECK_THAT(error_of(base(), {"parallel.virtual_stage=2"}), Contains("did you mean 'virtual_stages'"));
  CHECK_THAT(error_of(base(), {"parallel.bucket_size=2"}), Contains("did you mean 'bucket_size_mb'"));
  // overlap_param_gather needs the distributed optimizer: the message names both.
  CHECK_THAT(error_of(base(), {"parallel.overlap_param_gather=true"}),
             Contains("parallel.overlap_param_gather") && Contains("parallel.distributed_optimizer"));
  REQUIRE_NOTHROW(parse_config(
      [] {
        json j = base();
        j["parallel"] = {{"overlap_param_gather", true}, {"distributed_optimizer", true}};
        return j;
      }(),
      "t"));
  // --set: the schedule is a string field; lists parse as JSON.
  json o = base();
  apply_overrides(o, {"parallel.schedule=interleaved", "parallel.layers_per_stage=[1,1]", "parallel.timeout_s=30"});
  const Config oc = parse_config(o, "t");
  CHECK(oc.parallel.schedule == ScheduleKind::kInterleaved);
  CHECK(oc.parallel.layers_per_stage == std::vector<int64_t>{1, 1});
  CHECK(oc.parallel.timeout_s == 30);
  // Degrees > 1 parse (validate_layout checks them against a world size); bench (one process)
  // refuses them, and so does a train started without a launcher, saying how to launch.
  d = base();
  d["parallel"] = {{"tensor", 2}, {"pipeline", 2}, {"data", 2}};
  const Config big = parse_config(d, "t");
  try {
    check_single_process(big);
    FAIL("check_single_process accepted tensor 2");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Contains("`lattice bench` runs one process") && Contains("mpirun -np N"));
  }
  d["parallel"] = {{"pipeline", 2}, {"data", 2}};
  try {
    check_one_process_layout(parse_config(d, "t"));
    FAIL("check_one_process_layout accepted pipeline 2 x data 2");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Contains("needs 4 ranks") && Contains("mpirun -np 4 lattice train"));
  }
  CHECK_THROWS_AS(validate_for_training(big), InputError);
  REQUIRE_NOTHROW(check_single_process(parse_config(base(), "t")));
  REQUIRE_NOTHROW(check_one_process_layout(parse_config(base(), "t")));
}

TEST_CASE("validate_layout: each error class names its field") {
  json llama = base();
  llama["model"] = {{"arch", "llama"}, {"num_layers", 8},  {"hidden_size", 64},  {"num_attention_heads", 8},
                    {"num_kv_heads", 2},  {"vocab_size", 257}, {"seq_length", 32}, {"ffn_hidden_size", 192}};
  llama["training"] = {{"micro_batch_size", 1}, {"global_batch_size", 16}, {"train_iters", 10}};
  // World mismatch (RankGrid's messages), with data given and inferred.
  CHECK_THAT(layout_error_of(llama, 8, {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=1"}),
             Contains("parallel.tensor × parallel.pipeline × parallel.data") && Contains("8 ranks"));
  CHECK_THAT(layout_error_of(llama, 6, {"parallel.tensor=4"}), Contains("parallel.tensor"));
  CHECK_THAT(layout_error_of(llama, 2, {"parallel.tensor=4"}), Contains("parallel.tensor"));
  // Heads and kv heads vs tensor.
  CHECK_THAT(layout_error_of(llama, 8, {"parallel.tensor=8", "parallel.data=1"}),
             Contains("model.num_kv_heads") && Contains("kv heads") && Contains("parallel.tensor"));
  CHECK_THAT(layout_error_of(base(), 8, {"parallel.tensor=8"}),
             Contains("model.num_attention_heads") && Contains("parallel.tensor"));
  CHECK_THAT(layout_error_of(llama, 2, {"parallel.tensor=2", "model.ffn_hidden_size=193"}),
             Contains("model.ffn_hidden_size") && Contains("parallel.tensor"));
  // Vocabulary padding is automatic.
  CHECK(layout_of(llama, 2, {"parallel.tensor=2"}).padded_vocab_size == 512);
  // Layers vs pipeline × virtual stages.
  CHECK_THAT(layout_error_of(llama, 3, {"parallel.pipeline=3"}),
             Contains("model.num_layers") && Contains("parallel.pipeline × parallel.virtual_stages") &&
                 Contains("parallel.layers_per_stage"));
  CHECK_THAT(layout_error_of(llama, 3, {"parallel.pipeline=3", "parallel.layers_per_stage=[3,3]"}),
             Contains("parallel.layers_per_stage has 2 entries") && Contains("parallel.pipeline"));
  CHECK_THAT(layout_error_of(llama, 3, {"parallel.pipeline=3", "parallel.layers_per_stage=[3,3,3]"}),
             Contains("parallel.layers_per_stage sums to 9") && Contains("model.num_layers"));
  // Counts whose sum wraps around to num_layers (2^62 × 4 + 8 = 8 mod 2^64) are refused by the count.
  CHECK_THAT(layout_error_of(llama, 4,
                             {"parallel.pipeline=4", "parallel.layers_per_stage=[4611686018427387904,"
                                                     "4611686018427387904,4611686018427387904,4611686018427387912]"}),
             Contains("parallel.layers_per_stage[0] = 4611686018427387904 is more than model.num_layers (8)"));
  // micro_batch_size × data past 2^63 is no divisor of the global batch (not a division by a wrapped 0).
  CHECK_THAT(error_of(llama, {"training.micro_batch_size=4611686018427387904", "parallel.data=4"}),
             Contains("training.global_batch_size (16) must be a multiple of training.micro_batch_size"));
  {
    json speck = base();  // a model small enough for a micro-batch of 2^48 to pass the size check
    speck["model"] = {{"arch", "gpt2"},   {"num_layers", 1},  {"hidden_size", 1}, {"num_attention_heads", 1},
                      {"ffn_hidden_size", 1}, {"vocab_size", 2}, {"seq_length", 1}};
    speck["training"] = {{"micro_batch_size", 281474976710656}, {"global_batch_size", 281474976710656},
                         {"train_iters", 10}};
    CHECK_THAT(layout_error_of(speck, 65536, {}), Contains("must be a whole number >= 1; change "
                                                           "training.global_batch_size to a multiple of their product"));
  }
  {
    const ParallelLayout l = layout_of(llama, 3, {"parallel.pipeline=3", "parallel.layers_per_stage=[2,3,3]"});
    CHECK(l.layers_per_stage == std::vector<int64_t>{2, 3, 3});
  }
  // Micro-batches vs data.
  CHECK_THAT(layout_error_of(llama, 32),
             Contains("training.global_batch_size") && Contains("training.micro_batch_size") &&
                 Contains("parallel.data") && Contains("inferred"));
  CHECK_THAT(layout_error_of(llama, 3, {"parallel.data=3"}), Contains("parallel.data"));
  // Interleaved needs m % p == 0; v > 1 needs interleaved.
  CHECK_THAT(layout_error_of(llama, 4,
                             {"parallel.pipeline=4", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
                              "training.global_batch_size=6"}),
             Contains("parallel.schedule = \"interleaved\"") && Contains("multiple of parallel.pipeline"));
  CHECK_THAT(layout_error_of(llama, 2, {"parallel.pipeline=2", "parallel.virtual_stages=2"}),
             Contains("parallel.virtual_stages") && Contains("interleaved"));
  // Sequence parallelism: tensor > 1 and seq_length % tensor.
  CHECK_THAT(layout_error_of(llama, 1, {"parallel.sequence_parallel=true"}),
             Contains("parallel.sequence_parallel") && Contains("parallel.tensor"));
  CHECK_THAT(layout_error_of(llama, 2, {"parallel.sequence_parallel=true", "parallel.tensor=2", "model.seq_length=33"}),
             Contains("model.seq_length") && Contains("parallel.tensor"));
  // A single-process train checks its layout too.
  json bad_sp = base();
  bad_sp["parallel"] = {{"sequence_parallel", true}};
  CHECK_THROWS_AS(validate_for_training(parse_config(bad_sp, "t")), InputError);
  CHECK_THROWS_AS(validate_layout(parse_config(llama, "t"), 0), InputError);
}

TEST_CASE("validate_layout: valid layouts resolve") {
  json d = base();
  d["model"]["num_layers"] = 8;
  d["training"] = {{"micro_batch_size", 1}, {"global_batch_size", 16}, {"train_iters", 10}};
  // TP2 × PP2 × DP2 on 8 ranks.
  ParallelLayout l = layout_of(d, 8, {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
                                      "parallel.sequence_parallel=true"});
  CHECK(l.tensor == 2);
  CHECK(l.pipeline == 2);
  CHECK(l.data == 2);
  CHECK_FALSE(l.data_inferred);
  CHECK(l.micro_batches == 8);
  CHECK(l.layers_per_stage == std::vector<int64_t>{4, 4});
  CHECK(l.bubble == Approx(1.0 / 9));
  // PP4 × v2 interleaved with m = 8 (DP inferred = 1 on 4 ranks, global 16 / micro 2).
  l = layout_of(d, 4, {"parallel.pipeline=4", "parallel.virtual_stages=2", "parallel.schedule=interleaved",
                       "training.micro_batch_size=2"});
  CHECK(l.data == 1);
  CHECK(l.data_inferred);
  CHECK(l.micro_batches == 8);
  CHECK(l.layers_per_stage.size() == 8);
  CHECK(l.bubble == Approx(3.0 / (16 + 3)));
  // DP inferred.
  l = layout_of(d, 4, {});
  CHECK(l.data == 4);
  CHECK(l.data_inferred);
  CHECK(l.micro_batches == 4);
  CHECK(l.bubble == 0);
  // The printed layout names the shape, the micro-batches and the bubble.
  const Config c = parse_config(d, "t");
  const std::string text = format_layout(validate_layout(c, 4), c);
  CHECK_THAT(text, Contains("tensor 1 × pipeline 1 × data 4") && Contains("micro-batches per step per data-parallel "
                                                                          "rank: 4") &&
                       Contains("bubble"));
  // The world size of `lattice validate` without --world-size: the launcher's, else the product.
  json p = base();
  p["parallel"] = {{"tensor", 2}, {"pipeline", 3}};
  const Config pc = parse_config(p, "t");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMI_SIZE");
  ::unsetenv("SLURM_NTASKS");
  CHECK(default_world_size(pc) == 6);
  ::setenv("SLURM_NTASKS", "12", 1);
  CHECK(default_world_size(pc) == 12);
  ::setenv("PMI_SIZE", "18", 1);
  CHECK(default_world_size(pc) == 18);
  ::setenv("OMPI_COMM_WORLD_SIZE", "24", 1);
  CHECK(default_world_size(pc) == 24);
  ::setenv("OMPI_COMM_WORLD_SIZE", "two", 1);
  CHECK_THROWS_AS(default_world_size(pc), InputError);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMI_SIZE");
  ::unsetenv("SLURM_NTASKS");
}

// The warnings of a valid config on `world` ranks after `overrides`, joined by newlines.
std::string warnings_of(json doc, int world, const std::vector<std::string>& overrides) {
  apply_overrides(doc, overrides);
  const Config c = parse_config(doc, "test.json");
  std::string joined;
  for (const std::string& w : config_warnings(c, validate_layout(c, world))) joined += w + "\n";
  return joined;
}

TEST_CASE("config_warnings: settings the layout makes pointless are named") {
  json d = base();
  d["model"]["num_layers"] = 8;
  CHECK(warnings_of(d, 1, {}).empty());
  // Data-parallel settings on one data-parallel rank; on two they are used and not warned about.
  const std::vector<std::string> dp = {"parallel.distributed_optimizer=true", "parallel.grad_reduce_dtype=bf16"};
  CHECK_THAT(warnings_of(d, 1, dp), Contains("parallel.distributed_optimizer has no effect") &&
                                        Contains("parallel.grad_reduce_dtype bf16 has no effect"));
  CHECK(warnings_of(d, 2, dp).empty());
  // recompute_num_layers counts per chunk: PP2 has chunks of 4 layers, so 5 recomputes all, 4 is allowed.
  CHECK_THAT(warnings_of(d, 2, {"parallel.pipeline=2", "model.recompute=full", "model.recompute_num_layers=5"}),
             Contains("model.recompute_num_layers (5) is more than any model chunk's 4 layer(s)"));
  CHECK(warnings_of(d, 2, {"parallel.pipeline=2", "model.recompute=full", "model.recompute_num_layers=4"}).empty());
  CHECK(warnings_of(d, 1, {"model.recompute=full", "model.recompute_num_layers=5"}).empty());
}

TEST_CASE("device is cpu or cuda") {
  json d;
  d = base();
  d["device"] = "cuda";  // whether this binary and machine can run it is checked when training starts
  CHECK(parse_config(d, "test.json").device == "cuda");
  d = base();
  d["device"] = "tpu";
  CHECK_THAT(error_of(d), Contains("device must be one of cpu | cuda"));
}

TEST_CASE("parallel.backend: auto, nccl or mpi; nccl needs device cuda") {
  json d = base();
  CHECK(parse_config(d, "test.json").parallel.backend == CommBackend::kAuto);
  d["parallel"]["backend"] = "gloo";
  CHECK_THAT(error_of(d), Contains("parallel.backend must be one of auto | nccl | mpi, got \"gloo\""));
  d["parallel"]["backend"] = "mpi";
  CHECK(parse_config(d, "test.json").parallel.backend == CommBackend::kMpi);
  d["parallel"]["backend"] = "nccl";  // the base config's device is cpu
  CHECK_THAT(error_of(d), Contains("parallel.backend is \"nccl\" but device is \"cpu\"") &&
                              Contains("NCCL carries CUDA tensors only"));
  d["device"] = "cuda";
  CHECK(parse_config(d, "test.json").parallel.backend == CommBackend::kNccl);
}

TEST_CASE("top level must be an object") {
  CHECK_THAT(error_of(json::array({1, 2})), Contains("top level must be a JSON object"));
}

TEST_CASE("presets: gpt2 and llama defaults, explicit keys override") {
  json d = base();
  Config c = parse_config(d, "t");
  CHECK(c.model.norm == NormKind::kLayerNorm);
  CHECK(c.model.activation == Activation::kGelu);
  CHECK(c.model.position_embedding == PositionEmbedding::kLearned);
  CHECK(c.model.bias);
  CHECK(c.model.tie_embeddings);
  CHECK(c.model.ffn_hidden_size == 4 * 64);
  CHECK(c.model.num_kv_heads == 4);
  CHECK(c.model.norm_eps == 1e-5);

  d["model"]["arch"] = "llama";
  c = parse_config(d, "t");
  CHECK(c.model.norm == NormKind::kRmsNorm);
  CHECK(c.model.activation == Activation::kSwiglu);
  CHECK(c.model.position_embedding == PositionEmbedding::kRope);
  CHECK(!c.model.bias);
  CHECK(!c.model.tie_embeddings);
  CHECK(c.model.num_kv_heads == 4);
  CHECK(c.model.norm_eps == 1e-5);
  CHECK(c.model.ffn_hidden_size == 256);  // round_up(floor(8*64/3) = 170, 256)
  CHECK(default_swiglu_ffn_hidden_size(4096) == 11008);  // Llama-7B

  d["model"]["tie_embeddings"] = true;
  d["model"]["num_kv_heads"] = 2;
  d["model"]["ffn_hidden_size"] = 100;
  d["model"]["norm"] = "layernorm";
  c = parse_config(d, "t");
  CHECK(c.model.tie_embeddings);
  CHECK(c.model.num_kv_heads == 2);
  CHECK(c.model.ffn_hidden_size == 100);
  CHECK(c.model.norm == NormKind::kLayerNorm);
  CHECK(c.model.activation == Activation::kSwiglu);

  // An empty document is all defaults.
  c = parse_config(json::object(), "t");
  CHECK(c.device == "cpu");
  CHECK(c.optimizer.decay == DecayStyle::kCosine);
  CHECK(c.data.path.empty());
}

TEST_CASE("--set overrides") {
  json d = base();
  apply_overrides(d, {"model.num_layers=3", "model.arch=llama", "data.path=some/where", "optimizer.lr=0.01",
                      "data.shuffle=false", "device=cpu", "data.split=100", "model.init_from=\"x.safetensors\"",
                      "training.sample_interval=5", "training.sample_prompt=42"});
  const Config c = parse_config(d, "t");
  CHECK(c.model.num_layers == 3);
  CHECK(c.model.arch == Arch::kLlama);
  CHECK(c.model.activation == Activation::kSwiglu);
  CHECK(c.data.path == "some/where");
  CHECK(c.optimizer.lr == 0.01);
  CHECK(!c.data.shuffle);
  CHECK(c.data.split == "100");
  CHECK(c.model.init_from == "x.safetensors");
  CHECK(c.training.sample_interval == 5);
  CHECK(c.training.sample_prompt == "42");  // a string key: the text itself, not the number

  // A new section is created by an override.
  d = base();
  apply_overrides(d, {"logging.metrics_file=m.jsonl"});
  CHECK(parse_config(d, "t").logging.metrics_file == "m.jsonl");
  d = base();
  apply_overrides(d, {"logging.trace_file=runs/{rank}/trace.json"});
  CHECK(parse_config(d, "t").logging.trace_file == "runs/{rank}/trace.json");
  CHECK(parse_config(base(), "t").logging.trace_file.empty());  // off by default

  // Overrides are validated like the file.
  CHECK_THAT(error_of(base(), {"model.hidden_size=abc"}), Contains("model.hidden_size must be an integer"));
  CHECK_THAT(error_of(base(), {"model.hiden_size=3"}),
             Contains("--set model.hiden_size=3") && Contains("did you mean 'hidden_size'"));
  CHECK_THAT(error_of(base(), {"modle.hidden_size=3"}), Contains("did you mean 'model'"));
  CHECK_THAT(error_of(base(), {"model.num_layers"}), Contains("--set model.num_layers") && Contains("malformed"));
  CHECK_THAT(error_of(base(), {"=3"}), Contains("malformed"));
  CHECK_THAT(error_of(base(), {"model=3"}), Contains("'model' is a section"));
  CHECK_THAT(error_of(base(), {"parallel.tensor=0"}), Contains("parallel.tensor"));
}

TEST_CASE("config_to_json round trips and names every key") {
  json d = base();
  d["model"]["arch"] = "llama";
  d["model"]["num_kv_heads"] = 2;
  d["optimizer"]["decay"] = "linear";
  d["training"]["seed"] = 18446744073709551615ull;
  d["parallel"] = {{"tensor", 2},           {"pipeline", 2},          {"data", 2},
                   {"virtual_stages", 2},   {"schedule", "interleaved"}, {"layers_per_stage", {1, 1, 1, 1}},
                   {"sequence_parallel", true}, {"bucket_size_mb", 12.5}, {"overlap_grad_reduce", false},
                   {"distributed_optimizer", true}, {"overlap_param_gather", true}, {"timeout_s", 90}};
  const Config c = parse_config(d, "t");
  const json j = config_to_json(c);
  CHECK(j["model"]["arch"] == "llama");
  CHECK(j["model"]["norm"] == "rmsnorm");
  CHECK(j["optimizer"]["decay"] == "linear");
  CHECK(j["device"] == "cpu");
  CHECK(j["model"].size() == 19);
  CHECK(j["training"].size() == 16);
  CHECK(j["training"]["tf32"] == false);
  CHECK(j["training"]["gelu_fusion"] == "auto");
  CHECK(j["training"]["bias_grad_fusion"] == "auto");
  CHECK(j["training"]["deterministic_attention"] == true);
  CHECK(j["training"]["gemm_autotune_dir"] == "");
  CHECK(j["training"]["precision"] == "fp32");
  CHECK(j["training"]["sample_interval"] == 0);
  CHECK(j["training"]["sample_prompt"] == "");
  CHECK(j["optimizer"].size() == 10);
  CHECK(j["data"].size() == 5);
  CHECK(j["logging"].size() == 8);
  CHECK(j["parallel"].size() == 14);
  CHECK(j["parallel"]["backend"] == "auto");
  CHECK(j["parallel"]["grad_reduce_dtype"] == "fp32");
  CHECK(j["checkpoint"].size() == 5);
  CHECK(j["parallel"]["schedule"] == "interleaved");
  CHECK(j["parallel"]["layers_per_stage"] == json::array({1, 1, 1, 1}));
  CHECK(config_to_json(parse_config(base(), "t"))["parallel"]["data"] == 0);  // inferred by default
  const Config back = parse_config(j, "round trip");
  CHECK(config_to_json(back) == j);
  // The metrics file's run_start hash: 16 hex digits, equal for equal configs, not for others.
  CHECK(config_hash(back) == config_hash(c));
  CHECK(config_hash(c).size() == 16);
  CHECK(config_hash(parse_config(base(), "t")) != config_hash(c));
  // Through text too.
  CHECK(config_to_json(parse_config(json::parse(j.dump()), "text")) == j);
  CHECK(back.training.seed == 18446744073709551615ull);
}

TEST_CASE("sizes valid alone but too large together are refused naming them, before any figure overflows") {
  // 2e9 × 64 parameters of embedding alone is 1.3e11: fine; a hidden size of 1e6 with it is not.
  json big = base();
  apply_overrides(big, {"model.vocab_size=2000000000"});
  CHECK_NOTHROW(parse_config(big, "t"));
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"model.vocab_size=2000000000", "model.hidden_size=8000000",
                                 "model.num_attention_heads=8", "model.num_kv_heads=8"},
        std::vector<std::string>{"model.seq_length=1000000000", "training.micro_batch_size=1000000",
                                 "training.global_batch_size=1000000"}}) {
    const std::string e = error_of(base(), sets);
    CHECK_THAT(e, Contains("model.num_layers") && Contains("model.vocab_size") && Contains("model.seq_length") &&
                      Contains("training.micro_batch_size") && Contains("2^53"));
  }
}

TEST_CASE("checkpoint section: keys, defaults and mistakes") {
  const Config c = parse_config(base(), "t");
  CHECK(c.checkpoint.load == "auto");
  CHECK(c.checkpoint.async);
  CHECK(c.checkpoint.save_interval == 0);
  CHECK_THAT(error_of(base(), {"checkpoint.save_interval=10"}), Contains("checkpoint.dir"));
  CHECK_THAT(error_of(base(), {"checkpoint.keep_last=-1"}), Contains("checkpoint.keep_last"));
  CHECK_THAT(error_of(base(), {"checkpoint.load=\"\""}), Contains("checkpoint.load"));
  CHECK_THAT(error_of(base(), {"checkpoint.save_intervall=3"}), Contains("save_interval"));
  CHECK_THAT(error_of(base(), {"training.exit_duration_mins=-1"}), Contains("training.exit_duration_mins"));
  CHECK_THAT(error_of(base(), {"training.exit_interval=-5"}), Contains("training.exit_interval"));
  CHECK(parse_config(base(), "t").training.exit_interval == 0);
}

TEST_CASE("logging.run_dir: empty output keys default into the run folder, set ones win") {
  const auto parsed = [](const std::vector<std::string>& overrides) {
    json d = base();
    apply_overrides(d, overrides);
    return parse_config(d, "t");
  };
  const Config none = parsed({});
  CHECK(none.logging.metrics_file.empty());
  CHECK(none.checkpoint.dir.empty());
  const Config c = parsed({"logging.run_dir=runs/a", "logging.tensorboard_dir=tb/a", "checkpoint.save_interval=5"});
  CHECK(c.logging.metrics_file == "runs/a/metrics.jsonl");
  CHECK(c.logging.trace_file == "runs/a/trace.json");
  CHECK(c.logging.tensorboard_dir == "tb/a");  // given: kept
  CHECK(c.checkpoint.dir == "runs/a/checkpoints");  // so save_interval needs no checkpoint.dir
  CHECK(parsed({"logging.run_dir=runs/a/"}).logging.metrics_file == "runs/a/metrics.jsonl");
  // What validate prints (and the hash covers) is the resolved config; it parses back to itself.
  const json j = config_to_json(c);
  CHECK(j["logging"]["run_dir"] == "runs/a");
  CHECK(j["checkpoint"]["dir"] == "runs/a/checkpoints");
  CHECK(config_to_json(parse_config(j, "back")) == j);
  CHECK(config_hash(c) != config_hash(parsed({"logging.run_dir=runs/b", "logging.tensorboard_dir=tb/a",
                                               "checkpoint.save_interval=5"})));
}

TEST_CASE("load_config: file errors") {
  CHECK_THAT(load_error(temp_path("does-not-exist.json")), Contains("does-not-exist.json") && Contains("not found"));

  const std::string bad = write_file("bad.json", "{\n  \"model\": {\n    \"num_layers\": 2,,\n  }\n}\n");
  const std::string m = load_error(bad);
  CHECK_THAT(m, Contains("bad.json:3:") && Contains("invalid JSON") && Contains("line 3"));

  const std::string arr = write_file("array.json", "[1, 2, 3]");
  CHECK_THAT(load_error(arr), Contains("array.json") && Contains("top level must be a JSON object"));

  const std::string dup = write_file("dup.json", R"({"model": {"num_layers": 2, "hidden_size": 64, "num_layers": 3}})");
  CHECK_THAT(load_error(dup), Contains("dup.json") && Contains("'model.num_layers' is given twice"));

  const std::string good = write_file("good.json", base().dump(2));
  const Config c = load_config(good, {"model.num_layers=5"});
  CHECK(c.model.num_layers == 5);
  CHECK_THAT(load_error(good, {"training.micro_batch_size=3"}),
             Contains("good.json") && Contains("training.global_batch_size (8)"));
  CHECK_THAT(load_error(good, {"nonsense"}), Contains("malformed"));
}

TEST_CASE("validate_for_training checks the dataset files") {
  Config c = parse_config(base(), "t");
  c.data.path = "";
  try {
    validate_for_training(c);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains("data.path") && Contains("lattice data prepare"));
  }
  c.data.path = temp_path("missing/prefix");
  try {
    validate_for_training(c);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Contains(c.data.path + ".bin") && Contains("lattice data prepare"));
  }
  const std::string prefix = temp_path("ds");
  std::ofstream(prefix + ".bin") << "x";
  std::ofstream(prefix + ".idx") << "x";
  c.data.path = prefix;
  REQUIRE_NOTHROW(validate_for_training(c));
  c.model.init_from = temp_path("nope.safetensors");
  CHECK_THROWS_AS(validate_for_training(c), InputError);
}

TEST_CASE("data split and did-you-mean helpers") {
  const auto w = parse_data_split("949,50,1");
  CHECK(w[0] == Approx(0.949));
  CHECK(w[1] == Approx(0.05));
  CHECK(w[2] == Approx(0.001));
  const auto w2 = parse_data_split("98/2");
  CHECK(w2[1] == Approx(0.02));
  CHECK(w2[2] == 0.0);
  CHECK(closest_match("hiden_size", {"hidden_size", "seq_length"}) == "hidden_size");
  CHECK(closest_match("xyz", {"hidden_size", "seq_length"}).empty());
}
