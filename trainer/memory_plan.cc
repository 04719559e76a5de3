// Memory per rank of a layout (see memory_plan.h).
#include "trainer/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "parallel/activation_slots.h"
#include "parallel/schedule.h"
#include "trainer/model_stats.h"

namespace lattice {

MemoryPlan plan_memory(const Config& config, const ParallelLayout& layout) {
  // First version: rank_memory's even split, activations × the slot planner's slots. The item-by-item
  // accounting from the rank's own specs and buffers replaces it.
  const ModelStats stats = compute_model_stats(config);
  const RankMemory even = rank_memory(stats, layout.tensor, layout.pipeline, layout.data,
                                      config.parallel.distributed_optimizer);
  MemoryPlan plan;
  for (int pp = 0; pp < layout.pipeline; ++pp) {
    const std::vector<Action> actions = make_schedule(layout.schedule, layout.pipeline, layout.virtual_stages,
                                                      static_cast<int>(layout.micro_batches), pp);
    const ActivationSlots slots = plan_activation_slots(actions, layout.virtual_stages,
                                                        static_cast<int>(layout.micro_batches));
    for (int tp = 0; tp < layout.tensor; ++tp) {
      RankMemoryPlan r;
      r.tp_rank = tp;
      r.pp_rank = pp;
      r.params = stats.num_params / (int64_t{layout.tensor} * layout.pipeline);
      r.weight_bytes = even.weight_bytes;
      r.grad_bytes = even.grad_bytes;
      r.main_param_bytes = even.main_param_bytes;
      r.optimizer_bytes = even.optimizer_bytes;
      r.activation_bytes_per_micro_batch = even.activation_bytes;
      r.slots = slots.needed;
      for (int n : slots.needed) r.activation_bytes += even.activation_bytes / layout.virtual_stages * n;
      r.total_bytes = r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes + r.activation_bytes +
                      r.scratch_bytes + r.comm_bytes + r.workspace_bytes;
      plan.ranks.push_back(r);
    }
  }
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    if (plan.ranks[i].total_bytes > plan.peak_bytes) {
      plan.peak_bytes = plan.ranks[i].total_bytes;
      plan.peak_index = static_cast<int>(i);
    }
  }
  return plan;
}

std::string format_memory_plan(const MemoryPlan& plan, const Config& config, const ParallelLayout& layout) {
  const RankMemoryPlan& r = plan.peak();
  std::string out = fmt::format("memory per rank (tensor {} × pipeline {} × data {}, {}{}): largest is tp {} pp {}\n",
                                layout.tensor, layout.pipeline, layout.data, precision_name(config.training.precision),
                                config.parallel.distributed_optimizer && layout.data > 1 ? ", distributed optimizer" : "",
                                r.tp_rank, r.pp_rank);
  const auto line = [&](const std::string& k, int64_t v) { out += fmt::format("  {:<34}{}\n", k, format_bytes(v)); };
  line("weights", r.weight_bytes);
  line("gradients (fp32)", r.grad_bytes);
  line("main params (fp32)", r.main_param_bytes);
  line("AdamW moments (fp32)", r.optimizer_bytes);
  std::string slots;
  for (size_t c = 0; c < r.slots.size(); ++c) slots += fmt::format("{}{}", c ? "+" : "", r.slots[c]);
  line(fmt::format("activations ({} slot(s))", slots), r.activation_bytes);
  line("scratch and loss buffers", r.scratch_bytes);
  line("communication buffers", r.comm_bytes);
  line("workspace", r.workspace_bytes);
  line("total", r.total_bytes);
  return out;
}

}  // namespace lattice
