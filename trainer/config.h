// Config: the whole JSON run configuration (model, training, optimizer, data, logging, device,
// parallel). load_config() parses, applies --set overrides and validates; every mistake is an
// InputError naming the field (with a did-you-mean hint for unknown keys).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_config.h"
#include "kernels/error.h"  // InputError, thrown by everything below
#include "kernels/tensor.h"  // DType
#include "model/model_config.h"
#include "parallel/schedule.h"  // ScheduleKind, parse_schedule_kind, validate_schedule
#include "parallel/watchdog.h"  // kDefaultCommTimeoutS

namespace lattice {

enum class DecayStyle { kCosine, kLinear, kConstant };

// training.precision and parallel.grad_reduce_dtype: "fp32" or "bf16".
enum class Precision { kFp32, kBf16 };
// training.gelu_fusion and training.bias_grad_fusion: true, false, or "auto" (device_selection.h
// decides).
enum class Fusion { kAuto, kOn, kOff };

// parallel.backend: what carries a parallel job's collectives. MPI takes any tensor (CUDA ones staged
// through pinned host buffers); NCCL takes CUDA tensors, one GPU per rank. "auto" is NCCL for a CUDA
// job whose every rank has a GPU of its own, MPI otherwise (trainer/main.cc, job_world).
enum class CommBackend { kAuto, kNccl, kMpi };
const char* comm_backend_name(CommBackend b);

struct TrainingConfig {
  int64_t micro_batch_size = 4;
  int64_t global_batch_size = 8;
  int64_t train_iters = 100;
  uint64_t seed = 1234;
  int64_t eval_interval = 0;  // 0 = off
  int64_t eval_iters = 10;
  // Wall-clock budget of one job in minutes (0 = none): once a step ends past it, every rank agrees
  // to stop, a checkpoint is saved (when checkpoint.dir is set) and the program exits 0 — so a job
  // ends cleanly before a cluster's time limit.
  double exit_duration_mins = 0;
  // Stop after every step that is a multiple of this (0 = never), saving a checkpoint like a
  // preemption does: a deterministic stop (Megatron's --exit-interval), e.g. to split a run into
  // jobs of a fixed number of steps with the same train_iters (the LR schedule depends on it).
  int64_t exit_interval = 0;
  // Log a short sample (32 tokens continuing sample_prompt; "" = a new document) every this many
  // steps (0 = never); one process only. Training itself is unchanged by it.
  int64_t sample_interval = 0;
  std::string sample_prompt;
  // f32 matrix products on the GPU's tensor cores in TF32 (10-bit mantissa inputs, f32 accumulate):
  // several times faster, results no longer within 1e-5 of the CPU's. Off: exact f32 (the default).
  bool tf32 = false;
  // A GELU MLP's up projection with its GELU, and down_proj's input gradient with the GELU's backward,
  // each as one cuBLASLt GEMM with a GELU epilogue on the GPU (llm.c's gelu_fusion; Megatron fuses
  // bias and GELU in a kernel of its own). Off: bit for bit the unfused ops, so a selective recompute
  // repeats the forward exactly and results match the CPU's within 1e-5 in f32. Auto (the default):
  // on for the bf16 recipe on Hopper and later, as llm.c's default (device_selection.h). No effect
  // on the CPU, for SwiGLU, or where cuBLASLt declines a shape (ops.h matmul_bias_gelu).
  Fusion gelu_fusion = Fusion::kAuto;
  // A linear layer's bias gradient summed in its weight-gradient GEMM on the GPU (cuBLASLt's BGRADB
  // epilogue, as Transformer Engine's weight-gradient GEMM does) instead of in a kernel that reads dy
  // again. Off: bit for bit the unfused ops. Auto (the default): on for the bf16 recipe on Hopper
  // and later (device_selection.h). No effect on the CPU, for layers without a bias, or where
  // cuBLASLt declines a shape (ops.h linear_weight_grad).
  Fusion bias_grad_fusion = Fusion::kAuto;
  // GPU bf16: cuDNN's attention backward in its deterministic form, so that a run repeats bit for bit
  // (resume included). Off: its plain backward, which sums dQ with atomics (faster where the
  // deterministic one pays for its dP workspace: cuDNN before 9.25 on Hopper), as Transformer Engine
  // and Megatron run by default; the last bits of the gradients then vary from run to run.
  bool deterministic_attention = true;
  // GPU: each GEMM shape's cuBLASLt algorithm chosen by timing the heuristic's candidates at its first
  // call (PyTorch's TunableOp), rather than the heuristic's first; the choices are written to
  // DIR/rank-NNNNN.json and read back by a run given the same directory, so that a resumed or
  // repeated run computes the same bits (kernels/cuda/matmul_autotune.h). Empty (the default): off.
  std::string gemm_autotune_dir;
  // bf16: Megatron's mixed precision — bf16 parameter copies and activations, fp32 gradient
  // accumulation, fp32 master weights and moments in the optimizer; statistics and the loss in fp32.
  Precision precision = Precision::kFp32;
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
  // A run's folder (empty = none): its resolved config.json and rank 0's log.txt, and the default of
  // every output key left empty below and checkpoint.dir (resolve_run_dir).
  std::string run_dir;
  std::string metrics_file;  // empty = none; one JSON object per line per step
  std::string tensorboard_dir;  // empty = none; rank 0 writes a new TensorBoard event file per run
  std::string trace_file;    // empty = none; Chrome-trace JSON per rank (parallel/trace.h)
  // The hardware's peak in GFLOP/s per process (0 = unknown): the end-of-run summary reports MFU =
  // achieved / peak only when it is set, since the program cannot know the peak itself.
  double peak_gflops = 0;
  // Steps first..last (inclusive; 0 = off) between cudaProfilerStart and cudaProfilerStop, for
  // `nsys profile --capture-range=cudaProfilerApi` (Megatron's --profile-step-start/-end).
  int64_t profile_step_start = 0;
  int64_t profile_step_end = 0;
};

// Sharded checkpoints (checkpoint/). Saving is on when dir is set and save_interval > 0.
struct CheckpointConfig {
  std::string dir;            // checkpoint root: DIR/iter_{step:07d}/, DIR/latest
  int64_t save_interval = 0;  // steps between saves (0 = only at the end / on preemption)
  int64_t keep_last = 0;      // keep this many newest checkpoints (0 = all)
  bool async = true;          // write in the background after a fast snapshot
  // "auto": resume from DIR/latest when it exists, else start fresh; "none": never resume; any other
  // value: the path of a checkpoint (an iter_* directory, or a root holding `latest`) to load.
  std::string load = "auto";
};

// The parallel section (issue 4). Parsing checks each key's type and range; the layout as a whole
// (world size, divisibility, schedule needs) is validate_layout's job, since it needs the world size.
struct ParallelConfig {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t data = 0;  // 0 = inferred: world size / (tensor × pipeline)
  int64_t virtual_stages = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  // Empty = even split; else pipeline × virtual_stages layer counts (>= 1 each, summing to
  // model.num_layers), indexed by virtual stage (chunk c of pp rank r is virtual stage c·p + r).
  std::vector<int64_t> layers_per_stage;
  bool sequence_parallel = false;
  double bucket_size_mb = 25;
  bool overlap_grad_reduce = true;
  bool distributed_optimizer = false;
  bool overlap_param_gather = false;  // needs distributed_optimizer
  // The dtype of the data-parallel gradient reduction (the fp32 gradients are cast for it and back).
  Precision grad_reduce_dtype = Precision::kFp32;
  double timeout_s = kDefaultCommTimeoutS;
  CommBackend backend = CommBackend::kAuto;
};

// A layout resolved against a world size (what validate_layout returns and `lattice validate` prints).
struct ParallelLayout {
  int world_size = 1;
  int tensor = 1, pipeline = 1, data = 1;
  bool data_inferred = false;  // parallel.data was 0
  int virtual_stages = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t micro_batches = 1;                // per step per data-parallel rank
  std::vector<int64_t> layers_per_stage;    // pipeline × virtual_stages counts, by virtual stage
  int64_t padded_vocab_size = 0;            // vocab_size rounded up to a multiple of 128 × tensor (tensor > 1)
  double bubble = 0;                        // theoretical_bubble(schedule, p, v, m)
};

struct Config {
  ModelConfig model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  DataConfig data;
  LoggingConfig logging;
  std::string device = "cpu";
  ParallelConfig parallel;
  CheckpointConfig checkpoint;
};

// Reads `path`, applies overrides ("a.b=v", v parsed as JSON, else as a string), validates.
// Throws InputError naming the file / field on any problem.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from an already parsed document (a checkpoint's saved config); `source` names it in messages.
Config parse_config(const nlohmann::json& doc, const std::string& source);
// The fully resolved config (every key, defaults filled in), as `lattice validate` prints it.
nlohmann::json config_to_json(const Config& config);
// 16 hex digits: FNV-1a 64 of config_to_json(config).dump() (compact, keys sorted). The metrics file's
// run_start line carries it, so that runs of different configs appended to one file can be told apart.
std::string config_hash(const Config& config);

const char* decay_style_name(DecayStyle d);
const char* precision_name(Precision p);
const char* fusion_name(Fusion g);  // "auto", "true" or "false"
// The tensor dtype of a precision: f32 or bf16.
DType precision_dtype(Precision p);

// With logging.run_dir set, every output key left empty takes its place in the run folder:
// logging.metrics_file RUN_DIR/metrics.jsonl, logging.tensorboard_dir RUN_DIR/tensorboard,
// logging.trace_file RUN_DIR/trace.json, checkpoint.dir RUN_DIR/checkpoints. A key given a path keeps it.
// parse_config applies it, so validate prints the resolved paths and config_hash covers them.
void resolve_run_dir(Config& config);
// Those four keys: section, key, the name in RUN_DIR, and the field.
struct RunDirOutput {
  const char* section;
  const char* key;
  const char* name;
  std::string& (*field)(Config&);
};
const std::array<RunDirOutput, 4>& run_dir_outputs();

// Applies "a.b=v" overrides to a parsed document in place (what load_config does with --set).
// v is parsed as JSON when it parses (numbers, true/false, null, quoted strings, arrays), else
// taken as a string; for string-valued fields (model.arch, data.path, ...) an unquoted v is always
// the string itself. Unknown paths and a missing '=' are InputErrors with a did-you-mean hint; a
// value that is not valid UTF-8 is an InputError too.
void apply_overrides(nlohmann::json& doc, const std::vector<std::string>& overrides);
// The dotted key of a --set KEY=VALUE override, trimmed ("" when there is none).
std::string override_key(const std::string& override_text);

// The datasets a config names as (field, prefix): ("data.path", P), or ("data.blend[i][1]", P) for
// every blend entry.
std::vector<std::pair<std::string, std::string>> dataset_prefixes(const DataConfig& data);
// Every PREFIX.bin and PREFIX.idx of dataset_prefixes(data) exists, else an InputError naming the
// field and the file.
void check_dataset_files_exist(const DataConfig& data);

// The checks that only matter when training starts: the layout fits the job
// (validate_layout(config, world_size) with the job's real world size); exactly one of data.path / data.blend is set and every PREFIX.bin/PREFIX.idx it names
// exists; model.init_from (when set, and `check_init_from`: not for a run that resumes from a
// checkpoint, which does not read it) is a file or a directory. parse_config/load_config do everything else.
void validate_for_training(const Config& config, int world_size = 1, bool check_init_from = true);

// `config` with every path it holds absolute (against the current directory): data.path, the
// data.blend prefixes, model.init_from, checkpoint.dir and a checkpoint.load path, logging.run_dir,
// metrics_file, tensorboard_dir, trace_file and training.gemm_autotune_dir. For the copies a run
// keeps (its folder's config.json, a checkpoint's metadata), which `generate`, `export` and
// `report` read from other directories.
Config with_absolute_paths(Config config);

// What a valid config almost certainly did not mean on `layout`, each a sentence naming the fields,
// for a warning from `lattice validate` and at the start of `lattice train`: a warmup longer than the
// run, data-parallel settings on one data-parallel rank, a recompute_num_layers that covers every chunk.
std::vector<std::string> config_warnings(const Config& config, const ParallelLayout& layout);

// model.init_from, when set, is a file or a directory (InputError naming it otherwise).
void check_init_from_exists(const ModelConfig& model);

// Checks the parallel layout of `config` on `world_size` ranks; every problem is an InputError
// naming the field(s) to change: world = tensor × pipeline × data (data 0 = inferred), attention
// heads, kv heads and ffn_hidden_size divisible by tensor, num_layers divisible by pipeline ×
// virtual_stages (or layers_per_stage of that length summing to num_layers), an integer
// micro-batch count global_batch_size / (micro_batch_size × data) >= 1 that the schedule accepts
// (validate_schedule), sequence_parallel only with tensor > 1 and seq_length % tensor == 0.
ParallelLayout validate_layout(const Config& config, int world_size);
// The layout as `lattice validate` prints it (several lines, each ending in '\n').
std::string format_layout(const ParallelLayout& layout, const Config& config);
// The world size `lattice validate` checks against when --world-size is not given: the launcher's
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS, first set wins), else tensor × pipeline ×
// max(data, 1). A set but malformed variable is an InputError naming it.
int default_world_size(const Config& config);
// One process (`lattice bench`): any parallel degree > 1 is refused with an InputError that points
// to `mpirun ... lattice train` for measuring parallel layouts.
void check_single_process(const Config& config);
// `lattice train` started without mpirun/srun is one process: degrees whose product is > 1 are an
// InputError that says how to launch them.
void check_one_process_layout(const Config& config);

// data.split ("949,50,1", also "98,2" or "949/50/1") as three fractions that sum to 1
// (train, valid, test). Throws InputError naming `field` when malformed.
std::vector<double> parse_data_split(const std::string& split, const std::string& field = "data.split");

// For a command-line flag that is no option of a command (`--tensor-model-parallel-size 2`, `--lr`):
// the --set that gives that config key, when the name is a lattice key or another framework's name
// for one; else "".
std::string set_hint_for_flag(const std::string& flag);

// The candidate closest to `word` by edit distance when it is close enough to be a likely typo,
// else "". Used for the did-you-mean hints.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// Llama's FFN width rule, the default for activation swiglu: round_up(floor(8*hidden/3), 256).
int64_t default_swiglu_ffn_hidden_size(int64_t hidden_size);

}  // namespace lattice
