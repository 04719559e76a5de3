// lattice: the command-line entry point. Subcommands: train, validate, data prepare/inspect, export,
// generate, bench, report. Exit codes: 0 ok, 2 bad usage / config / input, 1 runtime failure. Logs and
// errors go to stderr, a command's report (validate, data inspect, bench, generate's text) to stdout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_bench.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_reader.h"
#include "data/batch_loader.h"
#include "data/inspect.h"
#include "data/prepare.h"
#include "kernels/backend.h"
#include "kernels/blas_runtime.h"
#include "kernels/error.h"
#include "parallel/grid.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/nccl_world.h"
#include "parallel/watchdog.h"
#include "trainer/batch_dump.h"
#include "trainer/benchmark.h"
#include "trainer/comm_bench.h"
#include "trainer/config.h"
#include "trainer/data_command.h"
#include "trainer/data_coverage.h"
#include "trainer/dataset_check.h"
#include "trainer/device_selection.h"
#include "trainer/generate_command.h"
#include "trainer/gpu_sharing.h"
#include "trainer/hf_export.h"
#include "trainer/launcher_env.h"
#include "trainer/logging_setup.h"
#include "trainer/memory_check.h"
#include "trainer/memory_plan.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"
#include "trainer/output_paths.h"
#include "trainer/plan_command.h"
#include "trainer/preemption.h"
#include "trainer/run_plot.h"
#include "trainer/run_report.h"
#include "trainer/train_loop.h"
#include "trainer/training_checkpoint.h"
#include "trainer/schedule_report.h"
#include "trainer/validate_report.h"
#include "trainer/version.h"

namespace lattice {
namespace {

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
  void add_to(CLI::App* cmd) {
    cmd->add_option("--config,-c", path, "JSON run config")->required();
    cmd->add_option("--set", overrides, "override a config key: --set model.num_layers=4 (repeatable)");
  }
  Config load() const { return load_config(path, overrides); }
};

// The memory check's message when this node's ranks need more than the host has (nullopt: fits).
std::optional<std::string> host_memory_shortfall(const Config& c, const ParallelLayout& layout) {
  // On a GPU the model's state is in device memory; the host holds staging buffers only.
  if (config_device(c) != Device::kCpu) return std::nullopt;
  return memory_shortfall(plan_memory(c, layout).peak(), ranks_per_node(), host_memory());
}

// On a GPU (selected: only `lattice train` asks, `lattice validate` may run where no GPU is): when the
// ranks sharing it need more than it has.
std::optional<std::string> device_memory_shortfall(const Config& c, const ParallelLayout& layout,
                                                   int ranks_sharing_gpu) {
  const Device device = config_device(c);
  if (device == Device::kCpu) return std::nullopt;
  const Backend& backend = backend_for("the memory check", device);
  return memory_shortfall(plan_memory(c, layout, device_attention_workspace(backend, c, layout)).peak(),
                          ranks_sharing_gpu, device_memory(backend));
}

// `lattice train` does not start a run that cannot fit (exit 2), unless told to: the refusal, or
// nullopt when it fits or --ignore-memory-check (then with a warning). In a parallel job every rank
// checks its own node and GPU and the job agrees (MpiRuntime::agree_on_setup_failure).
std::optional<std::string> memory_refusal(const Config& c, const ParallelLayout& layout, bool ignore,
                                          const GpuSharing& sharing) {
  std::optional<std::string> shortfall = host_memory_shortfall(c, layout);
  if (!shortfall) shortfall = device_memory_shortfall(c, layout, sharing.mine);
  if (!shortfall) return std::nullopt;
  if (ignore) {  // on every rank alike (one command line), so no rank votes
    spdlog::warn("{} (starting anyway: --ignore-memory-check)", *shortfall);
    return std::nullopt;
  }
  return *shortfall + "; or start anyway with --ignore-memory-check";
}

// Which ranks share this rank's GPU (a CPU run: none); selects the device. Collective over `world`.
GpuSharing job_gpu_sharing(const Config& c, HostChannel& world) {
  if (config_device(c) == Device::kCpu) return {};
  select_training_device(c);
  return gpu_sharing(backend_for("the ranks' GPUs", Device::kCuda), world);
}

// The report goes to stdout: the text one, or with --json one JSON document and nothing else. The
// memory warning goes to stderr; a dataset that fails its check is an error (exit 2).
int run_validate(const ConfigArgs& args, int world_size, bool as_json) {
  // Started by mpirun or srun (to check against the launcher's world size), every task checks the
  // same config alike: the report, warnings and errors come from the first alone, the exit code
  // from all. Two JSON documents on stdout would be none.
  // mpirun ends the job when the first task exits non-zero: a quiet task that failed first would cut
  // off the first task's error before it is printed (CI saw the error line missing). So a quiet
  // task's failure leaves a moment before its exit.
  struct QuietTaskFailureDelay {
    ~QuietTaskFailureDelay() {
      if (std::uncaught_exceptions() > 0) std::this_thread::sleep_for(std::chrono::seconds(3));
    }
  };
  std::optional<QuietTaskFailureDelay> delay_failure;
  if (launcher_rank() > 0) {
    spdlog::set_level(spdlog::level::off);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) return static_cast<int>(ExitCode::kRuntime);
    delay_failure.emplace();
  }
  Config c = args.load();
  const ParallelLayout layout = validate_layout(c, world_size > 0 ? world_size : default_world_size(c));
  check_output_paths(c, "", 0, OutputCheck::kInspect);  // what train would refuse, with nothing written
  for (const std::string& warning : config_warnings(c, layout)) spdlog::warn("{}", warning);
  const ModelStats stats = compute_model_stats(c);
  if (const auto shortfall = host_memory_shortfall(c, layout))
    spdlog::warn("{} (`lattice train` refuses to start it unless --ignore-memory-check)", *shortfall);
  // data.path / data.blend may be empty here (a config without its data yet); what is named is checked.
  const bool has_data = !c.data.path.empty() || !c.data.blend.empty();
  DataCoverage coverage;
  if (has_data) {
    check_datasets(c);
    // The splits a run samples from must each hold a sample: `train` would stop at its start.
    const auto datasets = open_datasets(c.data);
    const auto train = make_split_samples(c.data, datasets, Split::kTrain, c.model.seq_length);
    const auto valid = c.training.eval_interval > 0
                           ? make_split_samples(c.data, datasets, Split::kValid, c.model.seq_length)
                           : nullptr;
    coverage = data_coverage(c, *train, valid.get());
    for (const std::string& warning : coverage.warnings) spdlog::warn("{}", warning);
  }
  // What `lattice train` refuses before it starts, short of a GPU and the datasets' splits. A GPU
  // config is validated (and planned) on any build, a login node's too: a CPU-only one only warns.
  try {
    check_device_built(c);
  } catch (const InputError& e) {
    spdlog::warn("{} (`lattice train` refuses it on this binary)", e.what());
  }
  check_init_from_exists(c.model);
  std::string resume;
  if (const std::optional<std::string> dir = checkpoint_to_load(c.checkpoint)) {
    const CheckpointMetadata meta = check_checkpoint_fits(c, *dir);
    resume = fmt::format("checkpoint: resumes from {} (step {})\n", *dir, meta.state.step);
  }
  if (as_json) {
    nlohmann::json report = validate_report_json(c, stats, layout);
    report["memory_bytes"]["plan"] = memory_plan_json(plan_memory(c, layout));
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("%s\n", config_to_json(c).dump(2).c_str());
  std::printf("%s", format_model_stats(stats, config_device(c)).c_str());
  std::printf("%s", format_memory_plan(plan_memory(c, layout), c, layout).c_str());
  std::printf("%s", format_layout(layout, c).c_str());
  std::printf("%s", format_schedule_report(simulate_layout_schedule(layout)).c_str());
  if (has_data)
    std::printf("datasets: every token id < model.vocab_size %lld; %s\n", static_cast<long long>(c.model.vocab_size),
                c.training.eval_interval > 0 ? "the train and valid splits each hold a sample"
                                             : "the train split holds a sample");
  for (const std::string& line : coverage.info) std::printf("%s\n", line.c_str());
  std::printf("%s", resume.c_str());
  std::printf("config OK: %s\n", args.path.c_str());
  return 0;
}

// CLI11 has no did-you-mean for subcommands: follows argv through the subcommand tree and, at the
// first word that names no subcommand where one is expected, returns an error with the closest name.
// "" when the command line's subcommands are all known.
std::string unknown_subcommand_message(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = &app;
  std::string path = "lattice";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const std::vector<const CLI::App*> subs = cmd->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) break;
    std::vector<std::string> names;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subs) {
      names.push_back(sub->get_name());
      if (sub->get_name() == argv[i]) next = sub;
    }
    if (next == nullptr) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      const std::string hint = closest_match(argv[i], names);
      return fmt::format("{}: unknown command '{}'{} (commands: {}; see {} --help)", path, argv[i],
                         hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), all, path);
    }
    cmd = next;
    path += " " + next->get_name();
  }
  // A config key given as a flag (`lattice train --tensor-model-parallel-size 2`, Megatron-LM's way):
  // CLI11 would only say the arguments were not expected.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0 || cmd == &app) continue;
    if (cmd->get_option_no_throw(arg.substr(0, arg.find('='))) != nullptr) continue;
    if (const std::string hint = set_hint_for_flag(arg); !hint.empty())
      return fmt::format("{}: unknown option '{}'; {}", path, arg.substr(0, arg.find('=')), hint);
  }
  // An option before any command (`lattice --bogus`): CLI11 would only say a command is required.
  if (argc > 1 && argv[1][0] == '-' && std::string(argv[1]) != "--help" && std::string(argv[1]) != "-h" &&
      std::string(argv[1]) != "--version") {
    std::string all;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      all += (all.empty() ? "" : ", ") + sub->get_name();
    return fmt::format("lattice: unknown option '{}' (before a command lattice takes only --help and --version); "
                       "commands: {}; see lattice --help",
                       argv[1], all);
  }
  return "";
}

// Started by mpirun / srun (OpenMPI's or PMI's world size, or the PMIx rank that mpirun and
// `srun --mpi=pmix` give every task, is set): MPI is initialized only then,
// so a plain `lattice train` stays a process without MPI.
bool launched_under_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

// `lattice bench --comm` under mpirun: every rank takes part, rank 0 prints.
int run_comm_bench(int* argc, char*** argv) {
  const char* how = "launch it with 2 or more ranks, e.g. mpirun -np 2 lattice bench --comm";
  if (!launched_under_mpi())
    throw InputError(fmt::format("lattice bench --comm measures the links between ranks: {}", how));
  MpiRuntime mpi(argc, argv);
  if (mpi.world_size() < 2) throw InputError(fmt::format("lattice bench --comm has 1 rank: {}", how));
  auto world = mpi.world(std::make_shared<Watchdog>(kDefaultCommTimeoutS));
  const CommBenchResult result = bench_comm(*world);
  if (mpi.rank() == 0) std::printf("%s", format_comm_bench(result).c_str());
  world->host().barrier("end of bench --comm");
  return 0;
}

// A parallel job's world communicator by parallel.backend: MPI (CUDA tensors staged through pinned
// host buffers), or NCCL for CUDA tensors. "auto" takes NCCL where it can, as Megatron-LM and
// TorchTitan do: a CUDA job whose every rank has a GPU of its own; ranks sharing a GPU take MPI.
// `sharing` is the job's (every rank's the same `most`), so every rank chooses alike.
std::unique_ptr<Communicator> job_world(const Config& c, std::unique_ptr<MpiCommunicator> mpi_world,
                                        const GpuSharing& sharing) {
  const char* staged = "collectives over MPI, CUDA tensors staged through pinned host buffers";
  if (c.device != "cuda" || c.parallel.backend == CommBackend::kMpi) {
    if (c.device == "cuda") spdlog::info("parallel.backend mpi: {}", staged);
    return mpi_world;
  }
  if (c.parallel.backend == CommBackend::kAuto) {
    const std::string unfit = nccl_unfit_reason(sharing.most);
    if (!unfit.empty()) {
      spdlog::info("parallel.backend auto: {}, as {}", staged, unfit);
      return mpi_world;
    }
  }
  spdlog::info("parallel.backend {}: CUDA-tensor collectives and point-to-point over {} on their own streams; "
               "CPU tensors over MPI",
               comm_backend_name(c.parallel.backend), nccl_version());
  return nccl_world(std::move(mpi_world), sharing.most);
}

int run_train(const ConfigArgs& args, TrainOptions options, bool ignore_memory_check, int* argc, char*** argv) {
  // SIGTERM / SIGUSR1 / a first SIGINT only set a flag: the loop stops after the step every rank agrees
  // on, saves and exits 0 (trainer/stop_request.h); a second SIGINT aborts at once.
  install_preemption_handlers();
  if (!launched_under_mpi()) {
    Config c = args.load();
    if (const auto mismatch = launcher_world_mismatch(launcher_tasks(), 0)) throw InputError(*mismatch);
    check_one_process_layout(c);  // degrees > 1 need mpirun/srun: say so instead of a world-size error
    if (config_device(c) != Device::kCpu) select_training_device(c);
    if (const auto refusal = memory_refusal(c, validate_layout(c, 1), ignore_memory_check, GpuSharing{}))
      throw InputError(*refusal);
    check_datasets(c);  // before anything is allocated: a bad token id fails now, not at its sample
    spdlog::info("lattice train: config {}, BLAS: {}", args.path, blas_kernel_description());
    train(c, options);
    return 0;
  }
  // A parallel job: world = tensor × pipeline × data ranks.
  MpiRuntime mpi(argc, argv);
  install_preemption_handlers();  // again: MPI_Init must not have taken SIGTERM / SIGUSR1 / SIGINT over
  Config c;
  ParallelLayout layout;
  std::optional<MpiRuntime::SetupFailure> failure;
  try {
    c = args.load();
    if (const auto mismatch = launcher_world_mismatch(launcher_tasks(), mpi.world_size()))
      throw InputError(*mismatch);
    layout = validate_layout(c, mpi.world_size());
  } catch (const Error& e) {
    failure = MpiRuntime::SetupFailure{e.what(), static_cast<int>(e.code())};
  }
  if (const int exit_code = mpi.agree_on_setup_failure(failure)) return exit_code;
  auto watchdog = std::make_shared<Watchdog>(c.parallel.timeout_s);
  std::unique_ptr<MpiCommunicator> mpi_world = mpi.world(watchdog);
  const GpuSharing sharing = job_gpu_sharing(c, mpi_world->host());
  // Printed once: by rank 0 when it does not fit (every rank then most likely), else by each rank that does not.
  std::optional<MpiRuntime::SetupFailure> memory;
  try {
    if (const auto refusal = memory_refusal(c, layout, ignore_memory_check, sharing))
      memory = MpiRuntime::SetupFailure{*refusal, static_cast<int>(ExitCode::kBadInput)};
  } catch (const Error& e) {
    memory = MpiRuntime::SetupFailure{e.what(), static_cast<int>(e.code())};
  }
  if (const int exit_code = mpi.agree_on_setup_failure(memory)) return exit_code;
  // Rank 0 checks the datasets (a first read of a large one may take long) while the others wait.
  if (mpi.rank() == 0) {
    try {
      check_datasets(c);
    } catch (const Error& e) {
      spdlog::error("{} (ending all {} ranks)", e.what(), mpi.world_size());
      MpiRuntime::abort_job(static_cast<int>(e.code()));
    }
  }
  mpi.barrier();
  std::unique_ptr<Communicator> world = job_world(c, std::move(mpi_world), sharing);
  const RankGrid grid(mpi.world_size(), mpi.rank(), layout.tensor, layout.pipeline, layout.data);
  setup_logging(grid.rank(), grid.tp_rank(), grid.pp_rank(), grid.dp_rank());
  ProcessGroups groups = make_process_groups(grid, *world);
  spdlog::info("lattice train: config {}, BLAS: {}, {} ranks ({})", args.path, blas_kernel_description(),
               mpi.world_size(), grid.describe());
  spdlog::info("launcher: {}", describe_launcher(launcher_placement()));
  options.grid = &grid;
  options.groups = &groups;
  options.world = world.get();
  try {
    train(c, options);
  } catch (const AgreedFailure& e) {
    if (!e.quiet()) spdlog::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    // The other ranks would wait in their next collective until the watchdog fires: end the job.
    spdlog::error("{} (ending all {} ranks)", e.what(), mpi.world_size());
    MpiRuntime::abort_job(static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    spdlog::error("unexpected failure: {} (ending all {} ranks)", e.what(), mpi.world_size());
    MpiRuntime::abort_job(static_cast<int>(ExitCode::kRuntime));
  }
  world->host().barrier("end of run");  // no rank finalizes MPI while another still communicates
  return 0;
}

// A whole model in one process, for export and generate.
struct LoadedModel {
  Config config;
  std::unique_ptr<ParameterStore> params;
  std::string source;  // for the log
};

// --checkpoint: the model section comes from the checkpoint (a --config, when also given, must
// describe the same model), and so does the data section (which names the tokenizer) unless a
// --config gives one; any layout's shards are consolidated into one store. Else the config's
// model: model.init_from or its seeded initialization.
LoadedModel load_whole_model(const ConfigArgs& args, const std::string& checkpoint, const char* command) {
  if (checkpoint.empty()) {
    if (args.path.empty())
      throw InputError(fmt::format("lattice {} needs --config (the model a config describes) or --checkpoint (a "
                                   "checkpoint of any layout)",
                                   command));
    Config c = args.load();
    auto params = build_parameters(c, host_context());  // export and generate run on the host
    return {std::move(c), std::move(params), args.path};
  }
  const std::string dir = resolve_checkpoint(checkpoint);
  const CheckpointMetadata meta = read_checkpoint_metadata(dir);
  nlohmann::json sections{{"model", meta.config.value("model", nlohmann::json::object())},
                          {"data", meta.config.value("data", nlohmann::json::object())}};
  if (!args.path.empty()) {
    const nlohmann::json given = config_to_json(args.load());
    check_model_config(meta.config, given, dir,
                       "drop --config (the checkpoint carries its own model config), or pass the config it was "
                       "trained with (or --set these fields to the checkpoint's values)");
    sections["data"] = given["data"];
  } else if (!args.overrides.empty()) {
    // --set without --config edits the checkpoint's own sections: a data.path to find its tokenizer
    // is taken, a model field that differs from the checkpoint is refused like a --config's.
    nlohmann::json edited = sections;
    apply_overrides(edited, args.overrides);
    const nlohmann::json given = config_to_json(parse_config(edited, "--set"));
    check_model_config(meta.config, given, dir, "drop the --set of these fields: the checkpoint holds that model");
    sections["data"] = given["data"];
  }
  Config c = parse_config(sections, dir + "/metadata.json");
  auto params = consolidate_checkpoint(dir, c.model);
  return {std::move(c), std::move(params),
          fmt::format("{} (step {}, saved by {} ranks: tensor {}, pipeline {}, data {})", dir, meta.state.step,
                      meta.layout.world_size, meta.layout.tensor, meta.layout.pipeline, meta.layout.data)};
}

// --dtype of export and train --export: the fp32 weights (the master weights of a bf16 run), or bf16.
void add_export_dtype_option(CLI::App* cmd, std::string& dtype) {
  cmd->add_option("--dtype", dtype,
                  "dtype of the exported weights: fp32 (the fp32 master weights; default) or bf16 (rounded to nearest "
                  "even; config.json's torch_dtype says bfloat16)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

DType export_dtype_of(const std::string& dtype) { return dtype == "bf16" ? DType::kBF16 : DType::kF32; }

int run_export(const ConfigArgs& args, const std::string& checkpoint, const std::string& output, DType dtype) {
  const LoadedModel m = load_whole_model(args, checkpoint, "export");
  export_hf_model(m.config, *m.params, output, dtype);
  spdlog::info("wrote {}/model.safetensors and {}/config.json from {}", output, output, m.source);
  return 0;
}

int run_generate(const ConfigArgs& args, const std::string& checkpoint, const GenerateOptions& options) {
  LoadedModel m = load_whole_model(args, checkpoint, "generate");
  spdlog::info("generate: model from {}, on the CPU{}", m.source,
               m.config.device == "cuda" ? " (generate and export run on the host whatever device says)" : "");
  generate_text(m.config, *m.params, options);
  return 0;
}

int run(int argc, char** argv) {
  int* argc_ptr = &argc;
  char*** argv_ptr = &argv;
  CLI::App app{"lattice: LLM pre-training (GPT-2 / Llama), one binary for CPU and GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return version_text(); }, "print the version, git commit and build (CUDA, BLAS)");

  ConfigArgs train_args, validate_args, export_args;
  TrainOptions train_options;
  CLI::App* train_cmd = app.add_subcommand("train", "train a model from a JSON config");
  train_args.add_to(train_cmd);
  train_cmd->add_option("--export", train_options.export_dir,
                        "after training, write the model to this directory in Hugging Face format");
  std::string train_export_dtype = "fp32";
  add_export_dtype_option(train_cmd, train_export_dtype);
  bool ignore_memory_check = false;
  train_cmd->add_flag("--ignore-memory-check", ignore_memory_check,
                      "start even when the memory estimate (lattice validate) exceeds this node's memory");

  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "check a config and its parallel layout; print it resolved, the parameter count, FLOPs per token, "
                  "memory and the layout");
  validate_args.add_to(validate_cmd);
  bool validate_json = false;
  validate_cmd->add_flag("--json", validate_json,
                         "print one JSON document (resolved config, parameters, compute, memory, layout) and nothing "
                         "else on stdout");
  int validate_world_size = 0;  // 0 = the launcher's world size, else tensor × pipeline × max(data, 1)
  validate_cmd
      ->add_option("--world-size", validate_world_size,
                   "check the layout for this many ranks (default: the launcher's world size under "
                   "mpirun/srun, else tensor × pipeline × max(data, 1))")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
            if (digits && value.size() <= 8 && std::stol(value) >= 1 && std::stol(value) <= (1 << 24)) return "";
            return fmt::format("'{}' is not a number of ranks from 1 to {}", value, 1 << 24);
          },
          "RANKS"));

  ConfigArgs plan_args;
  PlanCommandOptions plan_options;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan", "rank the TP × PP × DP layouts of a config's model on N GPUs by predicted tokens/s: memory per GPU, "
              "step time (compute, pipeline bubble, exposed communication), MFU and a ready command line for each");
  plan_args.add_to(plan_cmd);
  plan_cmd->add_option("--gpus", plan_options.plan.gpus, "the number of GPUs to plan for")->required();
  plan_cmd->add_option("--gpus-per-node", plan_options.plan.gpus_per_node,
                       "GPUs per node (tensor parallelism stays inside one; default: the --gpu spec's, 8)")
      ->check(CLI::Range(1, 4096));
  plan_cmd->add_option("--gpu", plan_options.gpu,
                       "h100, h200, a100, cpu, or a JSON file of the GPU's figures (peak FLOP/s, memory, link "
                       "bandwidths and latencies)")
      ->capture_default_str();
  plan_cmd->add_option("--global-batch", plan_options.plan.global_batch,
                       "global batch in sequences (default: training.global_batch_size)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  plan_cmd->add_option("--top", plan_options.plan.top, "layouts to print, best first (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  plan_cmd->add_option("--gemm-efficiency", plan_options.plan.gemm_efficiency,
                       "the calibrated fraction of peak FLOP/s the layers reach")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  plan_cmd->add_flag("--json", plan_options.json, "print a JSON list of the layouts and nothing else on stdout");

  CLI::App* data_cmd = app.add_subcommand("data", "dataset tools");
  data_cmd->require_subcommand(1);
  PrepareOptions prepare;
  CLI::App* prepare_cmd = data_cmd->add_subcommand(
      "prepare", "tokenize text or JSONL files into a Megatron indexed dataset (PREFIX.bin + PREFIX.idx)");
  add_prepare_options(prepare_cmd, prepare);
  InspectOptions inspect;
  CLI::App* inspect_cmd = data_cmd->add_subcommand(
      "inspect", "print an indexed dataset's counts, dtype, length statistics and its first documents");
  add_inspect_options(inspect_cmd, inspect);
  ConfigArgs batch_args;
  int64_t batch_step = 1;
  std::string batch_split = "train";
  CLI::App* batch_cmd = data_cmd->add_subcommand(
      "batch", "print the tokens of one global batch as a run of the config reads it (one JSON line per sample), "
               "to feed a reference implementation the same batches");
  batch_args.add_to(batch_cmd);
  batch_cmd->add_option("--step", batch_step, "the training step (1-based), or with --split valid the evaluation's batch")
      ->required()
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  batch_cmd->add_option("--split", batch_split, "train, or valid (the batches every evaluation reads)")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "valid"}));

  ConfigArgs bench_args;
  int64_t bench_steps = 6;
  std::string bench_checkpoint_dir;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "train a few steps on synthetic tokens; print tokens/s and achieved GFLOP/s against the "
               "measured sgemm peak (or, with --checkpoint, time checkpoint saves and loads)");
  bench_args.add_to(bench_cmd);
  bench_cmd->get_option("--config")->required(false);  // --checkpoint needs none
  bool bench_comm_flag = false;
  bench_cmd->add_flag("--comm", bench_comm_flag,
                      "measure the all-reduce and p2p latency (α) and bandwidth (β) between the launched ranks, the "
                      "link figures of lattice plan --gpu FILE (under mpirun, 2 or more ranks)");
  bench_cmd->add_option("--steps", bench_steps, "steps to run (the first is warm-up; at least 3; default 6)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));  // fewer than kMinBenchSteps: run_benchmark says why
  bool bench_profile_ops = false;
  bench_cmd->add_flag("--profile-ops", bench_profile_ops,
                      "also print the device time of every op of the timed steps, by op and operand shapes, against "
                      "the step time (two events per op: a host-bound step runs slower than without it)");
  bench_cmd->add_option("--checkpoint", bench_checkpoint_dir,
                        "benchmark checkpoints instead, writing scratch checkpoints into this new or empty "
                        "directory (a non-empty one is refused; what the benchmark wrote is deleted at the end): for "
                        "the GPT-2 124M shape the synchronous save time, the training loop's stall per asynchronous "
                        "save, and the load time");

  std::string export_output, export_checkpoint, export_format = "hf";
  CLI::App* export_cmd = app.add_subcommand(
      "export", "write the model a config describes (model.init_from or its seeded init), or a checkpoint of any "
                "parallel layout, as Hugging Face safetensors + config.json");
  export_args.add_to(export_cmd);
  export_cmd->get_option("--config")->required(false);  // --checkpoint carries its own model config
  export_cmd->add_option("--checkpoint", export_checkpoint,
                         "export this checkpoint instead: an iter_* directory, or a checkpoint.dir holding `latest`");
  export_cmd->add_option("--format", export_format, "output format: hf (Hugging Face safetensors + config.json)")
      ->check(CLI::IsMember({"hf"}));
  export_cmd->add_option("--output,-o", export_output, "output directory")->required();
  std::string export_dtype = "fp32";
  add_export_dtype_option(export_cmd, export_dtype);

  ConfigArgs generate_args;
  GenerateOptions generate_options;
  std::string generate_checkpoint;
  CLI::App* generate_cmd = app.add_subcommand(
      "generate", "sample text from a model (a checkpoint of any layout, or a config's model.init_from or seeded "
                  "init) and print it; no KV cache: each new token recomputes the forward over the last "
                  "model.seq_length tokens (a smoke test, not a server)");
  generate_args.add_to(generate_cmd);
  generate_cmd->get_option("--config")->required(false);  // --checkpoint carries its own model config
  generate_cmd->add_option("--checkpoint", generate_checkpoint,
                           "sample this checkpoint: an iter_* directory, or a checkpoint.dir holding `latest`");
  add_generate_options(generate_cmd, generate_options);

  std::vector<std::string> report_dirs;
  bool report_csv = false;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "compare run folders (logging.run_dir): the config keys that differ, status (finished / stopped / "
                "running / failed), steps, final train and validation loss, tokens/s, MFU, bubble, hidden DP communication, peak "
                "memory");
  report_cmd->add_option("run_dirs", report_dirs, "run folders, each holding config.json and metrics.jsonl")
      ->required();
  report_cmd->add_flag("--csv", report_csv, "print CSV (numbers at full precision) instead of the aligned table");
  std::string report_plot;
  report_cmd->add_option("--plot", report_plot,
                         "also draw the runs' train and validation loss (by step and by tokens) and tokens/s into "
                         "this PNG (tools/plot_runs.py, matplotlib)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::string unknown = unknown_subcommand_message(app, argc, argv);
    if (!unknown.empty()) throw InputError(unknown);
    int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kBadInput);
  }

  train_options.export_dtype = export_dtype_of(train_export_dtype);
  // Refused, not warned: a Megatron-LM user's --bf16 habit would otherwise train a whole run in fp32.
  if (*train_cmd && train_options.export_dir.empty() && train_cmd->count("--dtype") > 0)
    throw InputError(fmt::format("train: --dtype {} needs --export DIR: it is the exported weights' dtype; to train in "
                                 "bf16 give --set training.precision=bf16",
                                 train_export_dtype));
  if (*train_cmd) return run_train(train_args, train_options, ignore_memory_check, argc_ptr, argv_ptr);
  if (*validate_cmd) return run_validate(validate_args, validate_world_size, validate_json);
  if (*plan_cmd) {
    plan_options.config_path = plan_args.path;
    plan_options.overrides = plan_args.overrides;
    return run_plan_command(plan_options);
  }
  if (*prepare_cmd) {
    prepare_dataset(prepare);
    return 0;
  }
  if (*inspect_cmd) {
    std::printf("%s", inspect_dataset(inspect).c_str());
    return 0;
  }
  if (*batch_cmd) {
    const Split split = batch_split == "train" ? Split::kTrain : Split::kValid;
    std::printf("%s", dump_global_batch(batch_args.load(), split, batch_step).c_str());
    return 0;
  }
  if (*report_cmd) {
    std::vector<RunRecord> runs;
    for (const std::string& dir : report_dirs) runs.push_back(read_run_folder(dir));
    std::printf("%s", format_run_report(runs, report_csv).c_str());
    if (!report_plot.empty()) plot_runs(report_dirs, report_plot);
    return 0;
  }
  if (*export_cmd) return run_export(export_args, export_checkpoint, export_output, export_dtype_of(export_dtype));
  if (*generate_cmd) return run_generate(generate_args, generate_checkpoint, generate_options);
  if (*bench_cmd && bench_profile_ops && (bench_comm_flag || !bench_checkpoint_dir.empty()))
    throw InputError("lattice bench: --profile-ops times training steps (--config), not --comm or --checkpoint");
  if (*bench_cmd && bench_comm_flag) return run_comm_bench(argc_ptr, argv_ptr);
  if (*bench_cmd && !bench_checkpoint_dir.empty()) {
    if (!bench_args.path.empty()) throw InputError("lattice bench: give --config or --checkpoint, not both");
    const CheckpointBenchResult r = bench_checkpoint(gpt2_124m_config(), bench_checkpoint_dir);
    std::printf("%s", format_checkpoint_bench(r).c_str());
    return 0;
  }
  if (*bench_cmd) {
    if (bench_args.path.empty()) throw InputError("lattice bench needs --config (train steps) or --checkpoint DIR");
    const Config c = bench_args.load();
    check_single_process(c);  // bench runs one process, like train
    // Bench writes nothing of the config's run; a trace only where bench's own command line asks for one.
    std::string bench_trace;
    for (const std::string& o : bench_args.overrides)
      if (override_key(o) == "logging.trace_file") bench_trace = c.logging.trace_file;
    return run_benchmark(c, bench_steps, bench_profile_ops, bench_trace);
  }
  return static_cast<int>(ExitCode::kBadInput);
}

}  // namespace
}  // namespace lattice

int main(int argc, char** argv) {
  lattice::setup_logging();  // first: ensure_fast_blas logs, and stdout is for reports only
  lattice::ensure_fast_blas(argc, argv);
  try {
    return lattice::run(argc, argv);
  } catch (const lattice::Error& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    spdlog::error("unexpected failure: {}", e.what());
    return static_cast<int>(lattice::ExitCode::kRuntime);
  }
}
