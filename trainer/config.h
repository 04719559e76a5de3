// Config: the whole JSON run configuration (model, training, optimizer, data, logging, device,
// parallel). load_config() parses, applies --set overrides and validates; every mistake is an
// InputError naming the field (with a did-you-mean hint for unknown keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_config.h"
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

}  // namespace lattice
