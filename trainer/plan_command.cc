// `lattice plan`'s output (see plan_command.h).
#include "trainer/plan_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "trainer/model_stats.h"

namespace lattice {
namespace {

// "70.55B", "124.4M", "18.9K": the size a model is spoken of.
std::string parameter_count_text(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", double(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", double(n) / 1e6);
  return fmt::format("{:.1f}K", double(n) / 1e3);
}

std::string override_key(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

// `text` as one shell word: as it is when it holds nothing the shell reads, else in single quotes.
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                              "0123456789_-+=.,:/@%") == std::string::npos;
  if (plain) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The user's own overrides (the planned model is the config file with them) less those a layout
// key replaces, then `layout`'s keys.
std::vector<std::string> with_user_overrides(const std::vector<std::string>& user, std::vector<std::string> layout) {
  std::vector<std::string> out;
  for (const std::string& u : user) {
    const bool replaced = std::any_of(layout.begin(), layout.end(),
                                      [&](const std::string& s) { return override_key(s) == override_key(u); });
    if (!replaced) out.push_back(u);
  }
  out.insert(out.end(), std::make_move_iterator(layout.begin()), std::make_move_iterator(layout.end()));
  return out;
}

// The command line's --set arguments: the user's, then the layout's keys that differ from the config.
std::string set_args(const LayoutPrediction& l, const Config& config, const std::vector<std::string>& user) {
  std::string out;
  for (const std::string& s : with_user_overrides(user, layout_overrides(l, &config))) out += " --set " + shell_word(s);
  return out;
}

}  // namespace

nlohmann::json plan_json(const PlanResult& result, const std::vector<std::string>& user_overrides) {
  nlohmann::json list = nlohmann::json::array();
  for (const LayoutPrediction& l : result.layouts) {
    list.push_back({
        {"tensor", l.tensor},
        {"pipeline", l.pipeline},
        {"data", l.data},
        {"virtual_stages", l.virtual_stages},
        {"schedule", schedule_kind_name(l.schedule)},
        {"micro_batch_size", l.micro_batch_size},
        {"micro_batches", l.micro_batches},
        {"global_batch_size", l.global_batch_size},
        {"sequence_parallel", l.sequence_parallel},
        {"distributed_optimizer", l.distributed_optimizer},
        {"recompute", recompute_name(l.recompute)},
        {"memory_bytes", l.memory_bytes},
        {"fits", l.fits},
        {"step_s", l.step_s},
        {"compute_s", l.compute_s},
        {"bubble_s", l.bubble_s},
        {"dp_exposed_s", l.dp_exposed_s},
        {"optimizer_s", l.optimizer_s},
        {"tp_comm_s", l.tp_comm_s},
        {"tokens_per_s", l.tokens_per_s},
        {"mfu", l.mfu},
        {"bubble", l.bubble},
        {"simulated", l.simulated},
        {"set", with_user_overrides(user_overrides, layout_overrides(l))},
    });
  }
  return list;
}

std::string format_plan(const PlanResult& result, const Config& config, const GpuSpec& gpu,
                        const PlanCommandOptions& options, double seconds) {
  const ModelStats stats = compute_model_stats(config);
  std::string out = fmt::format(
      "plan: {} ({} parameters, {} layers, seq {}) on {} × {} ({} per node, {} {} peak, {} usable per GPU)\n",
      options.config_path, parameter_count_text(stats.num_params), config.model.num_layers, config.model.seq_length,
      options.plan.gpus, gpu.name, result.gpus_per_node,
      // The cpu preset's 100 GFLOP/s would print as "0 TFLOP/s".
      result.peak_flops >= 1e12 ? fmt::format("{:.0f} TFLOP/s", result.peak_flops / 1e12)
                                : fmt::format("{:.0f} GFLOP/s", result.peak_flops / 1e9),
      precision_name(config.training.precision), format_bytes(int64_t(gpu.memory_bytes * gpu.usable_memory_fraction)));
  out += fmt::format(
      "  calibration: GEMM efficiency {:.2f} of peak; {} valid layouts, the first {} with the schedule simulated; "
      "planned in {:.3f} s\n",
      options.plan.gemm_efficiency, result.candidates, result.simulated, seconds);
  out += fmt::format("{:>3} {:>3} {:>3} {:>4} {:>2} {:>4} {:>5} {:>2} {:>2} {:>9} {:>10} {:>4} {:>8} {:>11} {:>6} {:>6}  {}\n",
                     "#", "TP", "PP", "DP", "v", "mbs", "m", "SP", "DO", "recompute", "memory", "fits", "step s",
                     "tokens/s", "MFU", "bubble", "command");
  if (!result.layouts.empty() && !result.layouts.front().fits)
    out += fmt::format("  none of the {} layouts fits in {} per GPU: the nearest to fitting first\n", result.candidates,
                       format_bytes(int64_t(gpu.memory_bytes * gpu.usable_memory_fraction)));
  // The cpu preset is one process per core: OpenBLAS's and OpenMP's threads would share the cores.
  const std::string cpu_threads = options.gpu == "cpu" ? " -x OMP_NUM_THREADS=1" : "";
  int rank = 0;
  for (const LayoutPrediction& l : result.layouts) {
    out += fmt::format(
        "{:>3} {:>3} {:>3} {:>4} {:>2} {:>4} {:>5} {:>2} {:>2} {:>9} {:>10} {:>4} {:>8.3f} {:>11.0f} {:>5.1f}% {:>5.1f}%  "
        "mpirun -np {}{} lattice train --config {}{}\n",
        ++rank, l.tensor, l.pipeline, l.data, l.virtual_stages, l.micro_batch_size, l.micro_batches,
        l.sequence_parallel ? "y" : "n", l.distributed_optimizer ? "y" : "n", recompute_name(l.recompute),
        format_bytes(l.memory_bytes), l.fits ? "yes" : "NO", l.step_s, l.tokens_per_s, 100 * l.mfu, 100 * l.bubble,
        options.plan.gpus, cpu_threads, shell_word(options.config_path), set_args(l, config, options.overrides));
  }
  return out;
}

int run_plan_command(const PlanCommandOptions& options) {
  const Config config = load_config(options.config_path, options.overrides);
  const GpuSpec gpu = gpu_spec(options.gpu);
  const auto start = std::chrono::steady_clock::now();
  const PlanResult result = plan_layouts(config, gpu, options.plan);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.json) {
    std::printf("%s\n", plan_json(result, options.overrides).dump(2).c_str());
    spdlog::info("plan: {} valid layouts, {} simulated, planned in {:.3f} s", result.candidates, result.simulated,
                 seconds);
  } else {
    std::printf("%s", format_plan(result, config, gpu, options, seconds).c_str());
  }
  if (!result.layouts.empty() && !result.layouts.front().fits) {
    // A script sweeping GPU counts must see it without parsing the table.
    spdlog::error("plan: none of the {} layouts fits in {} per GPU on {} GPUs (listed nearest to fitting first): "
                  "plan more GPUs (--gpus){}",
                  result.candidates, format_bytes(int64_t(gpu.memory_bytes * gpu.usable_memory_fraction)),
                  options.plan.gpus,
                  config.training.precision == Precision::kFp32 ? ", or training.precision bf16" : "");
    return static_cast<int>(ExitCode::kBadInput);
  }
  return 0;
}

}  // namespace lattice
