// Config: the whole JSON run configuration (model, training, optimizer, data, logging, device,
// parallel). load_config() parses, applies --set overrides and validates; every mistake is an
// InputError naming the field (with a did-you-mean hint for unknown keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_config.h"
#include "kernels/error.h"  // InputError, thrown by everything below
#include "model/model_config.h"

namespace lattice {

enum class DecayStyle { kCosine, kLinear, kConstant };

struct TrainingConfig {
  int64_t micro_batch_size = 4;
  int64_t global_batch_size = 8;
  int64_t train_iters = 100;
  uint64_t seed = 1234;
  int64_t eval_interval = 0;  // 0 = off
  int64_t eval_iters = 10;
  int64_t num_micro_batches() const { return global_batch_size / micro_batch_size; }  // single process
};

struct OptimizerConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_iters = 0;
  DecayStyle decay = DecayStyle::kCosine;
  int64_t decay_iters = 0;  // 0 = train_iters
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 = off
};

struct LoggingConfig {
  int64_t log_interval = 1;
  std::string metrics_file;  // empty = none; one JSON object per line per step
  std::string trace_file;    // empty = none; Chrome-trace JSON per rank (parallel/trace.h)
};

struct ParallelConfig {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t data = 1;
};

struct Config {
  ModelConfig model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  DataConfig data;
  LoggingConfig logging;
  std::string device = "cpu";
  ParallelConfig parallel;
};

// Reads `path`, applies overrides ("a.b=v", v parsed as JSON, else as a string), validates.
// Throws InputError naming the file / field on any problem.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from an already parsed document (tests); `source` names it in messages.
Config parse_config(const nlohmann::json& doc, const std::string& source);
// The fully resolved config (every key, defaults filled in), as `lattice validate` prints it.
nlohmann::json config_to_json(const Config& config);

const char* decay_style_name(DecayStyle d);

// Applies "a.b=v" overrides to a parsed document in place (what load_config does with --set).
// v is parsed as JSON when it parses (numbers, true/false, null, quoted strings, arrays), else
// taken as a string; for string-valued fields (model.arch, data.path, ...) an unquoted v is always
// the string itself. Unknown paths and a missing '=' are InputErrors with a did-you-mean hint.
void apply_overrides(nlohmann::json& doc, const std::vector<std::string>& overrides);

// The checks that only matter when training starts: exactly one of data.path / data.blend is set
// and every PREFIX.bin/PREFIX.idx it names exists; model.init_from (when set) exists.
// parse_config/load_config do everything else.
void validate_for_training(const Config& config);

// data.split ("949,50,1", also "98,2" or "949/50/1") as three fractions that sum to 1
// (train, valid, test). Throws InputError naming `field` when malformed.
std::vector<double> parse_data_split(const std::string& split, const std::string& field = "data.split");

// The candidate closest to `word` by edit distance when it is close enough to be a likely typo,
// else "". Used for the did-you-mean hints.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// Llama's FFN width rule, the default for activation swiglu: round_up(floor(8*hidden/3), 256).
int64_t default_swiglu_ffn_hidden_size(int64_t hidden_size);

}  // namespace lattice
