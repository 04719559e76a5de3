// The table of config keys: each once, with its type, rule and a one-line doc (defaults are the members'
// initial values). The README's config reference documents them at length; schema_test checks its keys.
#include "trainer/config_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

using nlohmann::json;

namespace {

// Largest accepted parallel degree: keeps products of degrees well inside int.
constexpr int64_t kMaxDegree = 65536;

std::vector<BlendEntry> read_blend(const json& b, const FieldContext& f) {
  // [[weight, prefix], ...]; [] = not set.
  if (!b.is_array())
    f.fail(fmt::format("{} must be an array of [weight, prefix] pairs such as [[0.7, \"data/a\"], [0.3, \"data/b\"]], "
                       "got {}",
                       f.name, describe_json(b)));
  std::vector<BlendEntry> blend;
  for (size_t i = 0; i < b.size(); ++i) {
    const json& e = b[i];
    if (!e.is_array() || e.size() != 2)
      f.fail(fmt::format("{}[{}] must be a [weight, prefix] pair, got {}", f.name, i, describe_json(e)));
    if (!e[0].is_number())
      f.fail(fmt::format("{}[{}][0] (the weight) must be a number, got {}", f.name, i, describe_json(e[0])));
    if (!e[1].is_string())
      f.fail(fmt::format("{}[{}][1] (the dataset prefix) must be a string, got {}", f.name, i, describe_json(e[1])));
    BlendEntry entry{e[0].get<double>(), e[1].get<std::string>()};
    if (!(std::isfinite(entry.weight) && entry.weight > 0))
      f.fail(fmt::format("{}[{}][0] (the weight) must be > 0, got {}", f.name, i, e[0].dump()));
    if (entry.prefix.empty()) f.fail(fmt::format("{}[{}][1] (the dataset prefix) is empty", f.name, i));
    blend.push_back(std::move(entry));
  }
  return blend;
}

json write_blend(const std::vector<BlendEntry>& blend) {
  json out = json::array();
  for (const BlendEntry& e : blend) out.push_back(json::array({e.weight, e.prefix}));
  return out;
}

// training.gelu_fusion and training.bias_grad_fusion: true, false or "auto".
Fusion parse_fusion(const json& j, const FieldContext& ctx) {
  if (j.is_boolean()) return j.get<bool>() ? Fusion::kOn : Fusion::kOff;
  if (j.is_string() && j.get<std::string>() == "auto") return Fusion::kAuto;
  ctx.fail(ctx.name + " must be true, false or \"auto\", got " + describe_json(j));
}
json fusion_json(const Fusion& f) { return f == Fusion::kAuto ? json("auto") : json(f == Fusion::kOn); }

std::vector<int64_t> read_layers_per_stage(const json& j, const FieldContext& f) {
  if (!j.is_array())
    f.fail(fmt::format("{} must be a list of layer counts per virtual stage such as [3, 5] (or [] for an even split), "
                       "got {}",
                       f.name, describe_json(j)));
  std::vector<int64_t> counts;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const FieldContext entry{f.source, fmt::format("{}[{}]", f.name, i)};
    const bool integral = e.is_number_integer() ||
                          (e.is_number_float() && std::isfinite(e.get<double>()) &&
                           std::floor(e.get<double>()) == e.get<double>() && std::fabs(e.get<double>()) < 9.0e18);
    if (!integral || (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
      entry.fail(fmt::format("{} must be an integer, got {}", entry.name, describe_json(e)));
    const int64_t n = e.is_number_float() ? static_cast<int64_t>(e.get<double>()) : e.get<int64_t>();
    if (n < 1) entry.fail(fmt::format("{} must be >= 1, got {}", entry.name, n));
    counts.push_back(n);
  }
  return counts;
}

ScheduleKind read_schedule(const json& j, const FieldContext& f) {
  const std::string name = read_string(j, f);
  try {
    return parse_schedule_kind(name);
  } catch (const InputError& e) {
    f.fail(e.what());
  }
}

std::vector<ConfigField> build_schema() {
  std::vector<ConfigField> all;

  SectionFields<ModelConfig> model(all, "model", &Config::model);
  model.choice("arch", &ModelConfig::arch, {Arch::kGpt2, Arch::kLlama}, arch_name,
               "the preset of norm, activation, position_embedding, tie_embeddings and bias");
  model.integer("num_layers", &ModelConfig::num_layers, in_range(1, kMaxDegree), "Transformer blocks");
  model.integer("hidden_size", &ModelConfig::hidden_size, at_least(1), "model width H");
  model.integer("num_attention_heads", &ModelConfig::num_attention_heads, at_least(1), "query heads");
  model.integer("num_kv_heads", &ModelConfig::num_kv_heads, at_least(1),
                "key/value heads (fewer = grouped-query attention); default num_attention_heads");
  model.integer("ffn_hidden_size", &ModelConfig::ffn_hidden_size, at_least(1),
                "MLP width F; default 4 * hidden_size (gelu) or Llama's rule (swiglu)");
  model.integer("vocab_size", &ModelConfig::vocab_size, in_range(2, std::numeric_limits<int32_t>::max()),
                "embedding rows V (token ids are int32)");
  model.integer("seq_length", &ModelConfig::seq_length, at_least(1), "tokens per sample T");
  model.choice("norm", &ModelConfig::norm, {NormKind::kLayerNorm, NormKind::kRmsNorm}, norm_name,
               "the norm; default from arch");
  model.number("norm_eps", &ModelConfig::norm_eps, positive(), "epsilon of the norms");
  model.choice("activation", &ModelConfig::activation, {Activation::kGelu, Activation::kSwiglu}, activation_name,
               "the MLP's activation; default from arch");
  model.choice("position_embedding", &ModelConfig::position_embedding,
               {PositionEmbedding::kLearned, PositionEmbedding::kRope}, position_embedding_name,
               "learned table or RoPE; default from arch");
  model.number("rope_theta", &ModelConfig::rope_theta, positive(), "RoPE base");
  model.boolean("tie_embeddings", &ModelConfig::tie_embeddings,
                "the LM head reuses the word embeddings; default from arch");
  model.boolean("bias", &ModelConfig::bias, "biases on linear layers and LayerNorm; default from arch");
  model.number("init_std", &ModelConfig::init_std, positive(), "std of the normal init");
  model.text("init_from", &ModelConfig::init_from, {}, "Hugging Face weights to load instead of random init");
  model.choice("recompute", &ModelConfig::recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull},
               recompute_name, "activation recomputation in backward: none | selective | full");
  model.integer("recompute_num_layers", &ModelConfig::recompute_num_layers, at_least(0),
                "full: recompute the first N layers of each model chunk; 0 = all");

  SectionFields<TrainingConfig> training(all, "training", &Config::training);
  training.integer("micro_batch_size", &TrainingConfig::micro_batch_size, at_least(1),
                   "sequences per forward/backward");
  training.integer("global_batch_size", &TrainingConfig::global_batch_size, at_least(1),
                   "sequences per optimizer step");
  training.integer("train_iters", &TrainingConfig::train_iters, at_least(1), "optimizer steps");
  training.unsigned_integer("seed", &TrainingConfig::seed, "seed of the parameter init");
  training.integer("eval_interval", &TrainingConfig::eval_interval, at_least(0), "steps between evaluations; 0 = off");
  training.integer("eval_iters", &TrainingConfig::eval_iters, at_least(1), "validation global batches (iterations) per evaluation, as Megatron-LM's --eval-iters");
  training.number("exit_duration_mins", &TrainingConfig::exit_duration_mins, non_negative(),
                  "wall-clock budget of the job in minutes; 0 = none");
  training.integer("exit_interval", &TrainingConfig::exit_interval, at_least(0),
                   "stop after every step that is a multiple of this; 0 = never");
  training.integer("sample_interval", &TrainingConfig::sample_interval, at_least(0),
                   "log a short sample every this many steps; 0 = never");
  training.text("sample_prompt", &TrainingConfig::sample_prompt, {}, "the text the samples continue");
  training.boolean("tf32", &TrainingConfig::tf32, "GPU f32 matmuls in TF32 (faster, ~1e-3 relative); false = exact f32");
  training.custom<Fusion>(
      "gelu_fusion", &TrainingConfig::gelu_fusion, false,
      "GPU: the GELU and its backward in cuBLASLt GEMM epilogues; false = our own GELU kernels, bit for bit; "
      "\"auto\" = true for bf16 on compute capability 9.0 and later without selective recompute",
      parse_fusion, fusion_json);
  training.custom<Fusion>(
      "bias_grad_fusion", &TrainingConfig::bias_grad_fusion, false,
      "GPU: a linear layer's bias gradient summed in its weight-gradient GEMM (cuBLASLt's BGRADB epilogue); "
      "false = its own kernel, bit for bit; \"auto\" = true for bf16 on compute capability 9.0 and later",
      parse_fusion, fusion_json);
  training.boolean("deterministic_attention", &TrainingConfig::deterministic_attention,
                   "GPU bf16: cuDNN's deterministic attention backward, the same bits every run; false = its "
                   "plain backward (dQ summed by atomics), faster, but runs no longer repeat bit for bit");
  training.text("gemm_autotune_dir", &TrainingConfig::gemm_autotune_dir, {},
                "GPU: choose each GEMM's cuBLASLt algorithm by timing, the choices kept in this directory "
                "(reuse it to repeat or resume bit for bit); empty = the heuristic's first");
  training.choice("precision", &TrainingConfig::precision, {Precision::kFp32, Precision::kBf16}, precision_name,
                  "fp32, or bf16 compute with fp32 master weights and gradient accumulation");

  SectionFields<OptimizerConfig> optimizer(all, "optimizer", &Config::optimizer);
  optimizer.number("lr", &OptimizerConfig::lr, non_negative(), "peak learning rate");
  optimizer.number(
      "min_lr", &OptimizerConfig::min_lr,
      [](const double& v, const Config& c, const FieldContext& f) {
        non_negative()(v, c, f);
        if (v > c.optimizer.lr) f.fail(fmt::format("{} ({}) must be <= optimizer.lr ({})", f.name, v, c.optimizer.lr));
      },
      "final learning rate of the decay, <= lr");
  optimizer.integer("warmup_iters", &OptimizerConfig::warmup_iters, at_least(0), "linear warmup steps");
  optimizer.choice("decay", &OptimizerConfig::decay, {DecayStyle::kCosine, DecayStyle::kLinear, DecayStyle::kConstant},
                   decay_style_name, "the decay from lr to min_lr after warmup");
  optimizer.integer("decay_iters", &OptimizerConfig::decay_iters, at_least(0),
                    "step at which the decay reaches min_lr; 0 = train_iters");
  optimizer.number("weight_decay", &OptimizerConfig::weight_decay, non_negative(), "decoupled weight decay");
  optimizer.number("beta1", &OptimizerConfig::beta1, below_one(), "AdamW first-moment decay");
  optimizer.number("beta2", &OptimizerConfig::beta2, below_one(), "AdamW second-moment decay");
  optimizer.number("eps", &OptimizerConfig::eps, positive(), "AdamW epsilon");
  optimizer.number("grad_clip", &OptimizerConfig::grad_clip, non_negative(), "global gradient norm clip; 0 = off");

  SectionFields<DataConfig> data(all, "data", &Config::data);
  data.text("path", &DataConfig::path, {}, "dataset prefix: PATH.bin + PATH.idx");
  data.custom<std::vector<BlendEntry>>("blend", &DataConfig::blend, false,
                                       "instead of path: [[weight, prefix], ...] mixes datasets by weight",
                                       read_blend, write_blend);
  data.text(
      "split", &DataConfig::split,
      [](const std::string& split, const Config&, const FieldContext& f) {
        try {
          parse_data_split(split);
        } catch (const InputError& e) {
          f.fail(e.what());
        }
      },
      "train,valid,test weights over documents");
  data.boolean("shuffle", &DataConfig::shuffle, "shuffle documents and samples");
  data.unsigned_integer("seed", &DataConfig::seed, "seed of the document and sample shuffles");

  SectionFields<LoggingConfig> logging(all, "logging", &Config::logging);
  logging.integer("log_interval", &LoggingConfig::log_interval, at_least(1), "steps between log lines");
  logging.text("run_dir", &LoggingConfig::run_dir, {},
               "run folder: config.json, log.txt and the default place of every output; empty = none");
  logging.text("metrics_file", &LoggingConfig::metrics_file, {}, "JSON-lines metrics file; empty = none");
  logging.text("tensorboard_dir", &LoggingConfig::tensorboard_dir, {},
               "TensorBoard event files of the metrics file's scalars; empty = none");
  logging.text("trace_file", &LoggingConfig::trace_file, {}, "Chrome-trace timeline per rank; empty = none");
  logging.number("peak_gflops", &LoggingConfig::peak_gflops, non_negative(),
                 "peak GFLOP/s of one process, for MFU; 0 = unknown");
  logging.integer("profile_step_start", &LoggingConfig::profile_step_start, at_least(0),
                  "GPU: first step of the nsys capture range (cudaProfilerStart); 0 = none");
  logging.integer("profile_step_end", &LoggingConfig::profile_step_end, at_least(0),
                  "GPU: last step of the nsys capture range (cudaProfilerStop after it); 0 = none");

  SectionFields<Config> device(all, "device");
  device.text(
      "", &Config::device,
      [](const std::string& d, const Config&, const FieldContext& f) {
        // "cuda" in a binary without the CUDA backend, or with no GPU, is refused when training
        // starts (trainer/device_selection.h): validate and export need no GPU.
        if (d != "cpu" && d != "cuda") f.fail(fmt::format("{} must be one of cpu | cuda, got \"{}\"", f.name, d));
      },
      "where the model runs (a top-level value)");

  SectionFields<ParallelConfig> parallel(all, "parallel", &Config::parallel);
  parallel.integer("tensor", &ParallelConfig::tensor, in_range(1, kMaxDegree), "tensor-parallel degree TP");
  parallel.integer("pipeline", &ParallelConfig::pipeline, in_range(1, kMaxDegree), "pipeline-parallel degree PP");
  parallel.integer(
      "data", &ParallelConfig::data,
      [](const int64_t& v, const Config&, const FieldContext& f) {
        if (v < 0)
          f.fail(fmt::format("{} must be >= 1, or 0 for world size / (tensor × pipeline), got {}", f.name, v));
        if (v > kMaxDegree) f.fail(fmt::format("{} must be <= {}, got {}", f.name, kMaxDegree, v));
      },
      "data-parallel degree DP; 0 = world size / (TP × PP)");
  parallel.integer("virtual_stages", &ParallelConfig::virtual_stages, in_range(1, kMaxDegree),
                   "model chunks per pipeline stage");
  parallel.custom<ScheduleKind>("schedule", &ParallelConfig::schedule, true, "gpipe, 1f1b or interleaved",
                                read_schedule, [](const ScheduleKind& k) { return json(schedule_kind_name(k)); });
  parallel.custom<std::vector<int64_t>>("layers_per_stage", &ParallelConfig::layers_per_stage, false,
                                        "layer counts per virtual stage; [] = even split", read_layers_per_stage,
                                        [](const std::vector<int64_t>& v) { return json(v); });
  parallel.boolean("sequence_parallel", &ParallelConfig::sequence_parallel,
                   "split the sequence across the TP ranks outside the tensor-parallel regions");
  parallel.number("bucket_size_mb", &ParallelConfig::bucket_size_mb, positive(), "data-parallel gradient bucket size");
  parallel.boolean("overlap_grad_reduce", &ParallelConfig::overlap_grad_reduce,
                   "reduce gradient buckets during backward");
  parallel.boolean("distributed_optimizer", &ParallelConfig::distributed_optimizer,
                   "shard the optimizer state over the DP ranks");
  parallel.boolean("overlap_param_gather", &ParallelConfig::overlap_param_gather,
                   "overlap the distributed optimizer's all-gather with the next forward");
  parallel.choice("grad_reduce_dtype", &ParallelConfig::grad_reduce_dtype, {Precision::kFp32, Precision::kBf16},
                  precision_name, "dtype of the data-parallel gradient reduction (half the bytes in bf16)");
  parallel.number("timeout_s", &ParallelConfig::timeout_s, positive(),
                  "seconds before a stuck collective ends the job");
  parallel.choice("backend", &ParallelConfig::backend, {CommBackend::kAuto, CommBackend::kNccl, CommBackend::kMpi},
                  comm_backend_name,
                  "what carries the collectives: auto (NCCL for CUDA tensors where every rank has a GPU, else MPI), "
                  "nccl, mpi");

  SectionFields<CheckpointConfig> checkpoint(all, "checkpoint", &Config::checkpoint);
  checkpoint.text("dir", &CheckpointConfig::dir, {}, "checkpoint root; empty = no saving");
  checkpoint.integer("save_interval", &CheckpointConfig::save_interval, at_least(0),
                     "steps between saves; 0 = only at the end and when stopped");
  checkpoint.integer("keep_last", &CheckpointConfig::keep_last, at_least(0), "newest checkpoints kept, up to the step saved; 0 = all");
  checkpoint.boolean("async", &CheckpointConfig::async, "write in the background after a snapshot");
  checkpoint.text(
      "load", &CheckpointConfig::load,
      [](const std::string& load, const Config&, const FieldContext& f) {
        if (load.empty())
          f.fail(fmt::format("{} must be \"auto\" (resume from checkpoint.dir/latest when it exists), \"none\", or the "
                             "path of a checkpoint to load; got \"\"",
                             f.name));
      },
      "auto, none, or the checkpoint to load");
  return all;
}

}  // namespace

const std::vector<ConfigField>& config_schema() {
  static const std::vector<ConfigField> schema = build_schema();
  return schema;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> names;
    for (const ConfigField& f : config_schema())
      if (std::find(names.begin(), names.end(), f.section) == names.end()) names.push_back(f.section);
    return names;
  }();
  return sections;
}

const std::vector<std::string>& config_keys(const std::string& section) {
  static const std::map<std::string, std::vector<std::string>> keys = [] {
    std::map<std::string, std::vector<std::string>> by_section;
    for (const ConfigField& f : config_schema()) {
      auto& list = by_section[f.section];
      if (!f.key.empty()) list.push_back(f.key);
    }
    return by_section;
  }();
  return keys.at(section);
}

const ConfigField* find_config_field(const std::string& name) {
  for (const ConfigField& f : config_schema())
    if (f.name() == name) return &f;
  return nullptr;
}

}  // namespace lattice
