// The validate report as JSON: the same numbers as the text report, keyed for tools.
#include "trainer/validate_report.h"

#include "parallel/schedule.h"
#include "trainer/schedule_report.h"

namespace lattice {

nlohmann::json validate_report_json(const Config& c, const ModelStats& s, const ParallelLayout& l) {
  const ScheduleReport schedule = simulate_layout_schedule(l);
  const RankMemory r = rank_memory(s, l.tensor, l.pipeline, l.data, c.parallel.distributed_optimizer);
  return {
      {"config", config_to_json(c)},
      {"parameters",
       {{"total", s.num_params},
        {"embedding", s.embedding_params},
        {"non_embedding", s.non_embedding_params},
        {"matmul", s.matmul_params}}},
      {"compute",
       {{"flops_per_token", s.flops_per_token},
        {"matmul_flops_per_token", s.matmul_flops_per_token},
        {"attention_flops_per_token", s.attention_flops_per_token},
        {"tokens_per_iter", s.tokens_per_iter},
        {"flops_per_iter", s.flops_per_iter}}},
      {"memory_bytes",
       {{"precision", precision_name(s.precision)},
        {"weights", s.weight_bytes},
        {"gradients", s.grad_bytes},
        {"main_params", s.main_param_bytes},
        {"optimizer", s.optimizer_bytes},
        {"activations", s.activation_bytes},
        {"total", s.total_bytes},
        {"per_rank",
         {{"weights", r.weight_bytes},
          {"gradients", r.grad_bytes},
          {"main_params", r.main_param_bytes},
          {"optimizer", r.optimizer_bytes},
          {"activations", r.activation_bytes},
          {"total", r.total_bytes},
          {"bytes_per_param", r.bytes_per_param}}}}},
      {"layout",
       {{"world_size", l.world_size},
        {"tensor", l.tensor},
        {"pipeline", l.pipeline},
        {"data", l.data},
        {"data_inferred", l.data_inferred},
        {"virtual_stages", l.virtual_stages},
        {"schedule", schedule_kind_name(l.schedule)},
        {"micro_batches", l.micro_batches},
        {"layers_per_stage", l.layers_per_stage},
        {"padded_vocab_size", l.padded_vocab_size},
        {"bubble_theory", l.bubble},
        {"bubble_simulated", schedule.bubble},
        {"peak_inflight_per_pp_rank", schedule.peak_inflight}}},
  };
}

}  // namespace lattice
