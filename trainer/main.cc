// lattice: the command-line entry point. Subcommands: train, validate, data prepare, export.
// Exit codes: 0 ok, 2 bad usage / config / input, 1 runtime failure.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_bench.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/hf_interop.h"
#include "data/inspect.h"
#include "data/prepare.h"
#include "kernels/blas_runtime.h"
#include "kernels/error.h"
#include "parallel/grid.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"
#include "trainer/benchmark.h"
#include "trainer/config.h"
#include "trainer/data_command.h"
#include "trainer/dataset_check.h"
#include "trainer/logging_setup.h"
#include "trainer/memory_check.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"
#include "trainer/preemption.h"
#include "trainer/train_loop.h"

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
  const ModelStats stats = compute_model_stats(c);
  return memory_shortfall(stats, rank_memory_bytes(stats, layout, c.parallel.distributed_optimizer), ranks_per_node(),
                          host_memory());
}

// `lattice train` does not start a run that cannot fit (exit 2), unless told to.
void check_host_memory(const Config& c, const ParallelLayout& layout, bool ignore) {
  const std::optional<std::string> shortfall = host_memory_shortfall(c, layout);
  if (!shortfall) return;
  if (ignore) {
    spdlog::warn("{} (starting anyway: --ignore-memory-check)", *shortfall);
    return;
  }
  throw InputError(*shortfall + "; or start anyway with --ignore-memory-check");
}

int run_validate(const ConfigArgs& args, int world_size) {
  Config c = args.load();
  const ParallelLayout layout = validate_layout(c, world_size > 0 ? world_size : default_world_size(c));
  std::printf("%s\n", config_to_json(c).dump(2).c_str());
  std::printf("%s", format_model_stats(compute_model_stats(c)).c_str());
  std::printf("%s", format_layout(layout, c).c_str());
  if (const auto shortfall = host_memory_shortfall(c, layout))
    spdlog::warn("{} (`lattice train` refuses to start it unless --ignore-memory-check)", *shortfall);
  // data.path / data.blend may be empty here (a config without its data yet); what is named is checked.
  if (!c.data.path.empty() || !c.data.blend.empty()) {
    check_datasets(c);
    std::printf("datasets: every token id < model.vocab_size %lld\n", static_cast<long long>(c.model.vocab_size));
  }
  std::printf("config OK: %s\n", args.path.c_str());
  return 0;
}

// Started by mpirun / srun (OpenMPI's or PMI's world size is set): MPI is initialized only then,
// so a plain `lattice train` stays a process without MPI.
bool launched_under_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

int run_train(const ConfigArgs& args, TrainOptions options, bool ignore_memory_check, int* argc, char*** argv) {
  Config c = args.load();
  // SIGTERM / SIGUSR1 only set a flag: the loop stops after the step every rank agrees on, saves and
  // exits 0 (trainer/stop_request.h).
  install_preemption_handlers();
  if (!launched_under_mpi()) {
    check_one_process_layout(c);  // degrees > 1 need mpirun/srun: say so instead of a world-size error
    check_host_memory(c, validate_layout(c, 1), ignore_memory_check);
    check_datasets(c);  // before anything is allocated: a bad token id fails now, not at its sample
    spdlog::info("lattice train: config {}, BLAS: {}", args.path, blas_kernel_description());
    train(c, options);
    return 0;
  }
  // A parallel job: world = tensor × pipeline × data ranks.
  MpiRuntime mpi(argc, argv);
  install_preemption_handlers();  // again: MPI_Init must not have taken SIGTERM / SIGUSR1 over
  const ParallelLayout layout = validate_layout(c, mpi.world_size());
  check_host_memory(c, layout, ignore_memory_check);  // every rank: the same figures, the same verdict
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
  auto watchdog = std::make_shared<Watchdog>(c.parallel.timeout_s);
  auto world = mpi.world(watchdog);
  const RankGrid grid(mpi.world_size(), mpi.rank(), layout.tensor, layout.pipeline, layout.data);
  setup_logging(grid.rank(), grid.tp_rank(), grid.pp_rank(), grid.dp_rank());
  ProcessGroups groups = make_process_groups(grid, *world);
  spdlog::info("lattice train: config {}, BLAS: {}, {} ranks ({})", args.path, blas_kernel_description(),
               mpi.world_size(), grid.describe());
  options.grid = &grid;
  options.groups = &groups;
  options.world = world.get();
  try {
    train(c, options);
  } catch (const Error& e) {
    // The other ranks would wait in their next collective until the watchdog fires: end the job.
    spdlog::error("{} (ending all {} ranks)", e.what(), mpi.world_size());
    MpiRuntime::abort_job(static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    spdlog::error("unexpected failure: {} (ending all {} ranks)", e.what(), mpi.world_size());
    MpiRuntime::abort_job(static_cast<int>(ExitCode::kRuntime));
  }
  world->barrier();  // no rank finalizes MPI while another still communicates
  return 0;
}

// --checkpoint: the model section comes from the checkpoint (a --config, when also given, must
// describe the same model); any layout's shards are consolidated into one store.
int run_export(const ConfigArgs& args, const std::string& checkpoint, const std::string& output) {
  if (checkpoint.empty()) {
    if (args.path.empty())
      throw InputError("lattice export needs --config (export the model a config describes) or --checkpoint "
                       "(export a checkpoint)");
    Config c = args.load();
    auto params = build_parameters(c);
    export_hf(c.model, *params, output);
    spdlog::info("wrote {}/model.safetensors and {}/config.json", output, output);
    return 0;
  }
  const std::string dir = resolve_checkpoint(checkpoint);
  const CheckpointMetadata meta = read_checkpoint_metadata(dir);
  if (!args.path.empty())
    check_model_config(meta.config, config_to_json(args.load()), dir,
                       "drop --config (the checkpoint carries its own model config), or pass the config it was "
                       "trained with (or --set these fields to the checkpoint's values)");
  const Config c = parse_config(nlohmann::json{{"model", meta.config.value("model", nlohmann::json::object())}},
                                dir + "/metadata.json");
  auto params = consolidate_checkpoint(dir, c.model);
  export_hf(c.model, *params, output);
  spdlog::info("wrote {}/model.safetensors and {}/config.json from {} (step {}, saved by {} ranks: tensor {}, "
               "pipeline {}, data {})",
               output, output, dir, meta.state.step, meta.layout.world_size, meta.layout.tensor, meta.layout.pipeline,
               meta.layout.data);
  return 0;
}

int run(int argc, char** argv) {
  int* argc_ptr = &argc;
  char*** argv_ptr = &argv;
  CLI::App app{"lattice: LLM pre-training (GPT-2 / Llama), one binary for CPU and GPU"};
  app.require_subcommand(1);

  ConfigArgs train_args, validate_args, export_args;
  TrainOptions train_options;
  CLI::App* train_cmd = app.add_subcommand("train", "train a model from a JSON config");
  train_args.add_to(train_cmd);
  train_cmd->add_option("--export", train_options.export_dir,
                        "after training, write the model to this directory in Hugging Face format");
  bool ignore_memory_check = false;
  train_cmd->add_flag("--ignore-memory-check", ignore_memory_check,
                      "start even when the memory estimate (lattice validate) exceeds this node's memory");

  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "check a config and its parallel layout; print it resolved, the parameter count, FLOPs per token, "
                  "memory and the layout");
  validate_args.add_to(validate_cmd);
  int validate_world_size = 0;  // 0 = the launcher's world size, else tensor × pipeline × max(data, 1)
  validate_cmd
      ->add_option("--world-size", validate_world_size,
                   "check the layout for this many ranks (default: the launcher's world size under "
                   "mpirun/srun, else tensor × pipeline × max(data, 1))")
      ->check(CLI::Range(1, 1 << 24));

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

  ConfigArgs bench_args;
  int64_t bench_steps = 6;
  std::string bench_checkpoint_dir;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "train a few steps on synthetic tokens; print tokens/s and achieved GFLOP/s against the "
               "measured sgemm peak (or, with --checkpoint, time checkpoint saves and loads)");
  bench_args.add_to(bench_cmd);
  bench_cmd->get_option("--config")->required(false);  // --checkpoint needs none
  bench_cmd->add_option("--steps", bench_steps, "steps to run (the first is warm-up)")->check(CLI::Range(2, 100000));
  bench_cmd->add_option("--checkpoint", bench_checkpoint_dir,
                        "benchmark checkpoints instead, in this (emptied) directory: for the GPT-2 124M shape the "
                        "synchronous save time, the training loop's stall per asynchronous save, and the load time");

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kBadInput);
  }

  if (*train_cmd) return run_train(train_args, train_options, ignore_memory_check, argc_ptr, argv_ptr);
  if (*validate_cmd) return run_validate(validate_args, validate_world_size);
  if (*prepare_cmd) {
    prepare_dataset(prepare);
    return 0;
  }
  if (*inspect_cmd) {
    std::printf("%s", inspect_dataset(inspect).c_str());
    return 0;
  }
  if (*export_cmd) return run_export(export_args, export_checkpoint, export_output);
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
    return run_benchmark(c, bench_steps);
  }
  return static_cast<int>(ExitCode::kBadInput);
}

}  // namespace
}  // namespace lattice

int main(int argc, char** argv) {
  lattice::ensure_fast_blas(argc, argv);
  lattice::setup_logging();
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
