// Memory per rank of a layout (see memory_plan.h). Every item mirrors an allocation the run makes,
// named next to it; tests/trainer/memory_plan_test.sh holds the sum to the allocations the run
// actually makes (the host storage high mark) and to the measured peak RSS.
#include "trainer/memory_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "checkpoint/hf_interop.h"
#include "checkpoint/shard_plan.h"
#include "kernels/cuda_workspace.h"
#include "kernels/f32_staging.h"
#include "model/model_chunk.h"
#include "model/model_layout.h"
#include "model/model_parameters.h"
#include "parallel/activation_slots.h"
#include "parallel/grad_buckets.h"
#include "parallel/optimizer.h"
#include "parallel/param_layout.h"
#include "parallel/schedule.h"
#include "trainer/model_builder.h"
#include "trainer/model_stats.h"

namespace lattice {

namespace {

// Host storage is allocated in multiples of 64 bytes (Storage::host); the GPU pool rounds similarly.
int64_t rounded(int64_t bytes) { return bytes <= 0 ? 0 : (bytes + 63) / 64 * 64; }

struct Shapes {
  int64_t B, T, N, n, H, D, Hq, Hkv, F, rows;  // this rank's: heads, FFN and vocabulary rows split over tp
  int64_t cs;                                   // bytes of the compute dtype
  bool swiglu, sp;
};

// model/activations.cc allocate_qkv: q, k and v in one allocation (MHA), or q alone and k, v in one.
int64_t qkv_bytes(const Shapes& s) {
  const int64_t q = s.N * s.Hq * s.D * s.cs, kv = s.N * s.Hkv * s.D * s.cs;
  return s.Hq == s.Hkv ? rounded(3 * q) : rounded(q) + rounded(2 * kv);
}

// model/activations.cc LayerActivations::allocate, for the groups a layer keeps.
int64_t layer_activation_bytes(const Shapes& s, unsigned groups) {
  int64_t b = 0;
  const int64_t norm_saved = 2 * rounded(4 * s.n);  // NormSaved: mean and rstd, f32
  if (groups & 1u) b += rounded(s.n * s.H * s.cs);  // input
  if (groups & 2u) {                                 // cheap: norm outputs and stats, the MLP activation
    b += 2 * rounded(s.N * s.H * s.cs) + 2 * norm_saved + rounded(s.N * s.F * s.cs);
  }
  if (groups & 4u) {  // core: q, k, v, attention output, lse, mid, up (and gate, with up in one allocation)
    b += qkv_bytes(s) + rounded(s.N * s.Hq * s.D * s.cs) + rounded(s.N * s.Hq * 4) + rounded(s.n * s.H * s.cs) +
         rounded(s.N * s.F * s.cs * (s.swiglu ? 2 : 1));
  }
  return b;
}

// model/activations.cc LayerScratch::allocate: one per chunk.
int64_t layer_scratch_bytes(const Shapes& s) {
  // d_hidden, d_mid, d_attn, dq/dk/dv (as q, k, v), d_up (SwiGLU: d_act, and d_gate with d_up in one).
  int64_t b = rounded(s.N * s.H * s.cs) + rounded(s.n * s.H * s.cs) + rounded(s.N * s.Hq * s.D * s.cs) +
              qkv_bytes(s) + (s.swiglu ? rounded(s.N * s.F * s.cs) + rounded(2 * s.N * s.F * s.cs)
                                       : rounded(s.N * s.F * s.cs));
  if (s.sp) b += 2 * rounded(s.n * s.H * s.cs) + 2 * rounded(s.N * s.H * s.cs);
  return b;
}

// model/model_chunk.cc: the groups a layer keeps per slot under its recompute mode.
unsigned kept_groups(Recompute mode) {
  if (mode == Recompute::kNone) return 7u;
  return mode == Recompute::kSelective ? 5u : 1u;
}

// The slots a schedule keeps in flight stop growing once m passes (v + 2)·p (1f1b holds at most p -
// rank, interleaved its warm-up of about (v + 1)·p forwards): a long step's slots are planned on that
// many micro-batches, a multiple of p as interleaving needs (layout_plan_test checks they agree).
int slot_micro_batches(const ParallelLayout& pl) {
  return static_cast<int>(std::min<int64_t>(pl.micro_batches, int64_t{pl.virtual_stages + 2} * pl.pipeline));
}

// The model layout of tp rank 0 of pipeline rank `pp_rank` (every tp rank of a stage holds the same shapes).
ModelLayout stage_layout(const Config& c, const ParallelLayout& pl, int pp_rank) {
  ModelLayout layout;
  layout.tp_rank = 0;
  layout.tp_size = pl.tensor;
  layout.sequence_parallel = c.parallel.sequence_parallel;
  layout.pp_rank = pp_rank;
  layout.pp_size = pl.pipeline;
  layout.virtual_stages = pl.virtual_stages;
  layout.layers_per_stage = pl.layers_per_stage;
  return layout;
}

// `slots`: the slot planner's on the rank's action list, with the model chunks' pools.
// `attention_workspace`: what the device's attention takes beside its operands (plan_memory's choice).
RankMemoryPlan plan_rank(const Config& c, const ParallelLayout& pl, int pp_rank, const ActivationSlots& slots,
                         int64_t attention_workspace) {
  const ModelConfig& m = c.model;
  const ModelLayout layout = stage_layout(c, pl, pp_rank);

  RankMemoryPlan r;
  r.pp_rank = pp_rank;
  const DType compute = precision_dtype(c.training.precision);
  const int64_t cs = static_cast<int64_t>(dtype_size(compute));
  const bool bf16 = compute != DType::kF32;

  // Parameters: the rank's own specs (its chunks, its tp share, vocabulary padding included), laid
  // out flat as ParamGradBuffer does: values in the compute dtype, fp32 gradients.
  const ParamLayout params(model_parameter_specs(m, layout));
  const int64_t P = params.numel();
  r.params = P;
  r.weight_bytes = rounded(P * cs);
  r.grad_bytes = rounded(P * 4);

  // Optimizer (parallel/optimizer.cc) and gradient buckets (parallel/grad_buckets.cc).
  const int dp = pl.data;
  const bool sharded = dp > 1 && c.parallel.distributed_optimizer;
  if (!sharded) {
    r.optimizer_bytes = 2 * rounded(P * 4);
    r.main_param_bytes = bf16 ? rounded(P * 4) : 0;  // fp32 parameters are their own main parameters
  }
  const DType reduce = precision_dtype(c.parallel.grad_reduce_dtype);
  const int64_t reduce_size = static_cast<int64_t>(dtype_size(reduce));
  std::vector<GradBucket> buckets;
  int64_t shard = 0;  // the distributed optimizer's state elements on this rank
  if (dp > 1) {
    buckets = make_grad_buckets(params, c.parallel.bucket_size_mb, dp);
    const bool narrow = reduce != DType::kF32;
    const int64_t rs = reduce_size;
    bool padded = false;
    for (const GradBucket& g : buckets) {
      shard += g.shard_numel;
      padded = padded || g.padded_numel(dp) != g.numel();
      const int64_t reduced = sharded ? g.padded_numel(dp) : g.numel();
      if (g.numel() > 0 && (narrow || reduced != g.numel())) r.comm_bytes += rounded(reduced * rs);
      // The sharded optimizer's all-gather staging of padded buckets.
      if (sharded && g.padded_numel(dp) != g.numel()) r.comm_bytes += rounded(g.padded_numel(dp) * cs);
    }
    if (sharded) {
      // In place (GradBuckets::in_place): the shards stay in the gradients, bf16 parameters gather
      // within themselves, and fp32 ones are their own main shard. Otherwise:
      const bool in_place = !narrow && !padded;
      if (!in_place) {
        r.comm_bytes += rounded(shard * 4);                // the reduce-scattered gradient shard
        if (narrow) r.comm_bytes += rounded(shard * rs);   // ... as reduced in bf16
        if (bf16) r.comm_bytes += rounded(shard * cs);     // the bf16 send buffer of the gather
      }
      r.optimizer_bytes = 2 * rounded(shard * 4);
      r.main_param_bytes = bf16 || !in_place ? rounded(shard * 4) : 0;  // an fp32 shard of its own
    }
  }

  const int64_t dp_comm_bytes = r.comm_bytes;  // the gradient buckets' and the optimizer's: built with it

  // Activations: each chunk's slots (the slot planner on this rank's action list) of its layers'
  // kept groups, one recompute set per chunk, and the scratch; the head's saved tensors per slot.
  const int m_batches = static_cast<int>(pl.micro_batches);
  r.slots = slots.needed;
  r.pool = slots.pool;
  r.pool_slots = slots.pool_slots;
  const int64_t B = c.training.micro_batch_size, T = m.seq_length;
  Shapes s{B, T, B * T, layout.local_tokens(m, B), m.hidden_size, m.head_dim(),
           m.num_attention_heads / pl.tensor, m.num_kv_heads / pl.tensor, m.ffn_hidden_size / pl.tensor,
           layout.vocab_rows_per_rank(m), cs, m.activation == Activation::kSwiglu, layout.sequence_parallel};
  bool has_head = false, has_embedding = false;
  for (int ch = 0; ch < pl.virtual_stages; ++ch) {
    const LayerRange range = layout.chunk_layers(m, ch);
    int64_t per_slot = 0;
    unsigned recomputed = 0;
    for (int64_t i = 0; i < range.count; ++i) {
      const Recompute mode =
          m.recompute == Recompute::kFull && m.recompute_num_layers > 0 && i >= m.recompute_num_layers ? Recompute::kNone
                                                                                                        : m.recompute;
      per_slot += layer_activation_bytes(s, kept_groups(mode));
      recomputed |= 7u & ~kept_groups(mode);
    }
    // A pool's slots are counted once, with its first chunk (its chunks keep the same layers).
    const int pool_slots = r.pool[static_cast<size_t>(ch)] == ch ? r.pool_slots[static_cast<size_t>(ch)] : 0;
    int64_t head_per_slot = 0;
    if (layout.has_head(ch)) {  // model/lm_head.cc: hidden, norm output and stats, logits, lse per slot
      has_head = true;
      head_per_slot = rounded(s.n * s.H * cs) + rounded(s.N * s.H * cs) + 2 * rounded(4 * s.n) +
                      rounded(s.N * s.rows * cs) + rounded(s.N * 4);
      r.scratch_bytes += rounded(s.N * s.H * cs);  // d_norm_out
      if (pl.tensor > 1) r.scratch_bytes += rounded(s.N * 4) + rounded(2 * s.N * 4);
      if (s.sp) r.scratch_bytes += rounded(s.n * s.H * cs);
    }
    has_embedding = has_embedding || layout.has_embedding(ch);
    if (layout.has_embedding(ch) && s.sp) r.scratch_bytes += rounded(s.N * s.H * cs);  // the gathered lookup
    r.activation_bytes_per_micro_batch += per_slot + head_per_slot;
    r.activation_bytes += (per_slot + head_per_slot) * pool_slots;
    r.scratch_bytes += layer_activation_bytes(s, recomputed) + rounded(s.n * s.H * cs) /* d_hidden */ +
                       layer_scratch_bytes(s);
  }
  // trainer/training_session.cc step losses; trainer/step_batches.cc ids and targets (host and
  // device copies) of every micro-batch.
  if (has_head) r.scratch_bytes += rounded(int64_t{m_batches} * s.N * 4);
  r.scratch_bytes += int64_t{m_batches} * 4 * rounded(s.N * 4);
  // Pipeline p2p buffers (parallel/pipeline_executor.cc): at most a send and a receive per slot in flight.
  if (pl.pipeline > 1) {
    int64_t in_flight = 0;
    for (int slots : r.slots) in_flight += slots;
    r.comm_bytes += 2 * in_flight * rounded(s.n * s.H * cs);
  }

  // bf16 on the CPU: operands widened into a pool of 8 f32 buffers (kernels/f32_staging.cc) that
  // only grow. Two of them end up holding the word table (the head's matmuls and the embedding
  // lookup widen it: measured on GPT-2 124M, bf16, one process) on a rank with the head, one on a
  // rank with the embedding only; the others at most the largest activation, N × max(F, H, Hq·D).
  if (bf16 && config_device(c) == Device::kCpu) {
    const int tables = has_head ? 2 : has_embedding ? 1 : 0;
    const int64_t activation = rounded(4 * s.N * std::max({s.F, s.H, s.Hq * s.D}));
    r.workspace_bytes = tables * rounded(4 * s.rows * s.H) + (F32Staging::kMaxStaged - tables) * activation;
  }
  // The CUDA backend's workspaces (kernels/cuda_workspace.h): cuBLASLt's and its bias-gradient
  // vector, kept from the first GEMM, and attention's.
  if (config_device(c) == Device::kCuda) {
    r.workspace_bytes =
        rounded(kCublasLtWorkspaceBytes) + rounded(kBiasGradScratchBytes) + rounded(attention_workspace);
  }

  // Checkpoints (checkpoint.dir set): the async writer's host snapshot of this rank's boxes (on a
  // GPU pinned host memory, not the device's), and, with the distributed optimizer, the buffer its
  // state is gathered through (Optimizer::copy_state: a bucket, or a chunk of one, at a time).
  if (!c.checkpoint.dir.empty()) {
    const int64_t snapshot = rounded(plan_shard(params, true, 0, dp).staging_numel * 4);
    (config_device(c) == Device::kCpu ? r.checkpoint_bytes : r.host_snapshot_bytes) = snapshot;
    if (sharded) r.checkpoint_bytes += rounded(state_gather_numel(buckets, dp, kStateGatherBytes) * 4);
  }
  // A resume on a GPU reads this rank's state (sharded: its shard) into host memory, then copies it
  // to the device; on the CPU it reads straight into the state. Not in the peak: the plan cannot
  // know whether the run resumes.
  const bool may_resume =
      !c.checkpoint.dir.empty() || (c.checkpoint.load != "auto" && c.checkpoint.load != "none");
  if (may_resume && config_device(c) != Device::kCpu) r.resume_host_bytes = 3 * rounded((sharded ? shard : P) * 4);
  // At start-up, beside the parameters, the gradients, the optimizer's state and the data-parallel
  // buffers, but before the activations, the scratch and the pipeline's buffers exist
  // (trainer/training_session.cc builds the model chunks after the optimizer's initial values).
  // bf16: the exact fp32 init values of one parameter at a time (trainer/model_builder.cc's
  // initial_values), in a scratch the size of the largest.
  if (bf16) r.transient_bytes = rounded(params.largest_param_numel() * 4);
  // model.init_from on the CPU: the HF tensor being read and the parameter cut from it, both host
  // tensors, each at most the file's largest tensor (on a GPU they are host memory beside it).
  if (!m.init_from.empty() && config_device(c) == Device::kCpu) r.transient_bytes += 2 * rounded(largest_hf_tensor_numel(m) * 4);

  const int64_t steady = r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes + r.activation_bytes +
                         r.scratch_bytes + r.comm_bytes + r.workspace_bytes;
  const int64_t at_init = r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes + dp_comm_bytes +
                          r.transient_bytes;
  r.storage_bytes = std::max(steady + r.checkpoint_bytes, at_init);
  if (config_device(c) == Device::kCpu) {
    // Every bucket's non-blocking reduction may be in flight at once by the end of backward, each
    // with a temporary of up to its message (all-reduce or reduce-scatter: OpenMPI 4.1 measured
    // between half and all of them at once); the embedding group's sum may overlap them.
    for (const GradBucket& g : buckets) r.mpi_temporary_bytes += (sharded ? g.padded_numel(dp) : g.numel()) * reduce_size;
    if (m.tie_embeddings && pl.pipeline > 1 && (pp_rank == 0 || pp_rank == pl.pipeline - 1))
      r.mpi_temporary_bytes += s.rows * s.H * 4;
  }
  r.total_bytes = r.storage_bytes + r.mpi_temporary_bytes;
  return r;
}

}  // namespace

AttentionShape rank_attention_shape(const Config& config, const ParallelLayout& layout) {
  const ModelConfig& m = config.model;
  return {config.training.micro_batch_size, m.seq_length, m.num_attention_heads / layout.tensor,
          m.num_kv_heads / layout.tensor, m.head_dim()};
}

MemoryPlan plan_memory(const Config& config, const ParallelLayout& layout,
                       std::optional<int64_t> bf16_attention_workspace) {
  MemoryPlan plan;
  const bool bf16 = config.training.precision == Precision::kBf16;
  plan.attention_workspace_estimated = config_device(config) == Device::kCuda && bf16 && !bf16_attention_workspace;
  // f32: our kernels' backward scratch, allocated per call while the activations are held. bf16:
  // cuDNN's, as the device sized it, or the estimate (the deterministic backward's; the plain one
  // takes none worth counting).
  const AttentionShape shape = rank_attention_shape(config, layout);
  const int64_t attention_workspace =
      !bf16 ? f32_attention_workspace_bytes(shape)
            : bf16_attention_workspace.value_or(
                  config.training.deterministic_attention ? cudnn_sdpa_workspace_estimate(shape) : 0);
  // Every tp rank of a stage holds the same shapes (the vocabulary is padded to split evenly); tp
  // rank 0 also writes the replicated tensors in checkpoints, so its figures are the stage's.
  // Stages with the same chunks (the layer counts, which holds the embedding or head) and the same
  // activation slots need the same: the middle stages of a deep pipeline are planned once.
  std::map<std::vector<int64_t>, RankMemoryPlan> planned;
  const int p = layout.pipeline, v = layout.virtual_stages;
  const int slot_batches = slot_micro_batches(layout);
  for (int pp = 0; pp < p; ++pp) {
    std::vector<int64_t> key;
    for (int ch = 0; ch < v; ++ch) {
      const int vs = ch * p + pp;
      key.push_back(layout.layers_per_stage.empty() ? 0 : layout.layers_per_stage[static_cast<size_t>(vs)]);
      key.push_back(vs == 0 ? 1 : vs == p * v - 1 ? 2 : 0);
    }
    const ActivationSlots slots =
        plan_activation_slots(make_schedule(layout.schedule, p, v, slot_batches, pp), v, slot_batches,
                              activation_slot_pools(config.model, stage_layout(config, layout, pp)));
    key.insert(key.end(), slots.needed.begin(), slots.needed.end());
    key.insert(key.end(), slots.pool.begin(), slots.pool.end());
    key.insert(key.end(), slots.pool_slots.begin(), slots.pool_slots.end());
    auto it = planned.find(key);
    if (it == planned.end()) {
      it = planned.emplace(key, plan_rank(config, layout, pp, slots, attention_workspace)).first;
    }
    plan.ranks.push_back(it->second);
    plan.ranks.back().pp_rank = pp;
  }
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    if (plan.ranks[i].total_bytes > plan.peak_bytes) {
      plan.peak_bytes = plan.ranks[i].total_bytes;
      plan.peak_index = static_cast<int>(i);
    }
  }
  return plan;
}

nlohmann::json memory_plan_json(const MemoryPlan& plan) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMemoryPlan& r : plan.ranks) {
    ranks.push_back({{"pp_rank", r.pp_rank}, {"params", r.params},
                     {"weights", r.weight_bytes}, {"gradients", r.grad_bytes}, {"main_params", r.main_param_bytes},
                     {"optimizer", r.optimizer_bytes}, {"activations", r.activation_bytes},
                     {"activations_per_micro_batch", r.activation_bytes_per_micro_batch}, {"activation_slots", r.slots},
                     {"scratch", r.scratch_bytes}, {"communication", r.comm_bytes}, {"workspace", r.workspace_bytes},
                     {"checkpoint", r.checkpoint_bytes}, {"transient", r.transient_bytes},
                     {"host_snapshot", r.host_snapshot_bytes}, {"resume_host", r.resume_host_bytes}, {"storage", r.storage_bytes},
                     {"mpi_temporary", r.mpi_temporary_bytes}, {"peak", r.total_bytes}});
  }
  return {{"peak", plan.peak_bytes}, {"peak_pp_rank", plan.peak().pp_rank},
          {"attention_workspace_estimated", plan.attention_workspace_estimated},
          {"ranks", ranks}};
}

std::string format_memory_plan(const MemoryPlan& plan, const Config& config, const ParallelLayout& layout) {
  const RankMemoryPlan& r = plan.peak();
  const double state_bytes =
      static_cast<double>(r.weight_bytes + r.grad_bytes + r.main_param_bytes + r.optimizer_bytes);
  std::string out = fmt::format(
      "memory per rank (tensor {} × pipeline {} × data {}, {}{}), largest: pipeline stage {} ({:.2f} bytes/parameter "
      "for weights, gradients, main params and moments)\n",
      layout.tensor, layout.pipeline, layout.data, precision_name(config.training.precision),
      config.parallel.distributed_optimizer && layout.data > 1 ? ", distributed optimizer" : "", r.pp_rank,
      r.params > 0 ? state_bytes / static_cast<double>(r.params) : 0.0);
  const auto line = [&](const std::string& k, int64_t v) { out += fmt::format("  {:<40}{}\n", k, format_bytes(v)); };
  line(fmt::format("weights ({:.1f}M params)", r.params / 1e6), r.weight_bytes);
  line("gradients (fp32)", r.grad_bytes);
  line("main params (fp32)", r.main_param_bytes);
  line("AdamW moments (fp32)", r.optimizer_bytes);
  const std::string slots = activation_slots_text(r.pool, r.pool_slots);
  line(fmt::format("activations (slots: {})", slots),
       r.activation_bytes);
  line("scratch, loss head, batches", r.scratch_bytes);
  line("communication buffers", r.comm_bytes);
  if (r.workspace_bytes > 0) {
    line(config_device(config) == Device::kCpu ? "bf16 → f32 operand workspace"
         : plan.attention_workspace_estimated  ? "workspaces (cuDNN's: estimated)"
                                               : "cuBLASLt + attention workspace",
         r.workspace_bytes);
  }
  if (r.checkpoint_bytes > 0) line("checkpoint buffers", r.checkpoint_bytes);
  if (r.transient_bytes > 0) line("init scratch (at start-up)", r.transient_bytes);
  if (r.mpi_temporary_bytes > 0) line("MPI collective temporary", r.mpi_temporary_bytes);
  line("peak", r.total_bytes);
  // Host memory outside the peak (see RankMemoryPlan).
  if (r.host_snapshot_bytes > 0) line("+ host: checkpoint snapshot (pinned)", r.host_snapshot_bytes);
  if (r.resume_host_bytes > 0) line("+ host, while resuming: loaded state", r.resume_host_bytes);
  if (layout.pipeline > 1) {
    out += "  peak per pipeline stage:";
    for (const RankMemoryPlan& x : plan.ranks) out += fmt::format(" {}{}", x.pp_rank ? "/ " : "", format_bytes(x.total_bytes));
    out += "\n";
  }
  return out;
}

}  // namespace lattice
