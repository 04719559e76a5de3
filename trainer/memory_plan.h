// Memory per rank of a layout, item by item, from the shapes the run allocates: the rank's own
// parameter specs (its pipeline chunks, its tensor-parallel share, padding included), the activation
// slots the schedule keeps in flight on each chunk (the slot planner's numbers), the per-chunk layer
// scratch, the loss head's buffers, communication buffers and the bf16 staging workspace.
// `lattice validate`, the start and end of `lattice train` and `lattice plan` all use it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/attention_shape.h"
#include "trainer/config.h"

namespace lattice {

// One rank's predicted bytes. Every rank of a pipeline stage needs the same: its tp ranks hold
// equal shapes and its dp replicas equal shards (up to rounding); tp rank 0 writes the checkpoint's
// replicated tensors too, so the figures are its.
struct RankMemoryPlan {
  int pp_rank = 0;
  int64_t params = 0;                  // elements this rank stores (vocabulary padding included)
  int64_t weight_bytes = 0;            // compute copy (fp32 or bf16)
  int64_t grad_bytes = 0;              // fp32 gradient buffer
  int64_t main_param_bytes = 0;        // fp32 master weights (bf16, or the distributed optimizer's shard)
  int64_t optimizer_bytes = 0;         // AdamW moments (sharded over data with the distributed optimizer)
  int64_t activation_bytes = 0;        // saved activations: a chunk's per slot × its pool's slots, per pool
  int64_t activation_bytes_per_micro_batch = 0;  // one micro-batch through all of the rank's chunks
  std::vector<int> slots;              // micro-batches in flight per chunk (the pipeline's p2p buffers)
  std::vector<int> pool, pool_slots;   // the chunks' activation-slot pools (ActivationSlots): what is allocated
  int64_t scratch_bytes = 0;           // per-chunk layer scratch, recompute sets, embedding/head/loss buffers
  int64_t comm_bytes = 0;              // pipeline p2p buffers, bf16 reduce staging, distributed-optimizer buffers
  int64_t workspace_bytes = 0;         // CPU: bf16 operands widened to f32 (largest op); CUDA: cuBLASLt's,
                                       // f32 attention's (kernels/cuda_workspace.h), and bf16 attention's
                                       // as the device sizes it (cuDNN's; plan_memory's argument)
  int64_t checkpoint_bytes = 0;        // checkpoint.dir: the async writer's snapshot (+ the distributed
                                       // optimizer's gather bucket)
  // Host memory beside a GPU's (not in storage_bytes): the checkpoint writer's pinned snapshot, and
  // what a resume reads before it copies to the device: the rank's fp32 state (sharded: its shard).
  int64_t host_snapshot_bytes = 0;
  int64_t resume_host_bytes = 0;
  int64_t transient_bytes = 0;         // at start-up, freed before the activations exist: bf16's fp32 init scratch
                                       // (the largest parameter), model.init_from's HF tensor and parameter (CPU)
  // The tensors' high mark: the steady state (everything above but the transient) or, at start, the
  // steady state before the checkpoint buffers and the first step's workspace, plus the transient.
  int64_t storage_bytes = 0;
  // Not tensors: MPI's temporary buffers of the host collectives: every DP bucket, whose non-blocking
  // reductions may all be in flight by the end of backward (how many really overlap varies from run
  // to run: this is the upper end), and the tied word embeddings' gradient summed over the embedding
  // group. 0 on GPUs, where NCCL reduces in place.
  int64_t mpi_temporary_bytes = 0;
  int64_t total_bytes = 0;  // storage + MPI's temporary: what the rank's peak memory should be
};

struct MemoryPlan {
  std::vector<RankMemoryPlan> ranks;   // one per pipeline stage (its tp ranks hold the same shapes)
  // bf16 on a GPU, planned without the device's figure for its attention workspace (cuDNN's, which
  // only the GPU can size; `lattice validate` and `lattice plan` off the GPU): estimated instead.
  bool attention_workspace_estimated = false;
  int64_t peak_bytes = 0;              // the largest total_bytes
  int peak_index = 0;                  // its index in `ranks`
  const RankMemoryPlan& peak() const { return ranks[static_cast<size_t>(peak_index)]; }
};

// Throws InputError like validate_layout when the layout does not fit the model (heads, FFN size).
// `bf16_attention_workspace`: what bf16 attention takes on this rank's device beyond the plan's own
// items, as the device sizes it (Backend::attention_bf16_workspace_bytes of rank_attention_shape);
// nullopt where no device says (kernels/cuda_workspace.h's estimate of cuDNN's then).
MemoryPlan plan_memory(const Config& config, const ParallelLayout& layout,
                       std::optional<int64_t> bf16_attention_workspace = std::nullopt);

// The shape of one rank's attention calls: the micro-batch, the sequence, the rank's share of the heads.
AttentionShape rank_attention_shape(const Config& config, const ParallelLayout& layout);

// The plan as validate --json reports it: the peak and every rank's items.
nlohmann::json memory_plan_json(const MemoryPlan& plan);

// The table `lattice validate` and the start of `lattice train` print: the largest rank item by
// item, and each pipeline stage's total.
std::string format_memory_plan(const MemoryPlan& plan, const Config& config, const ParallelLayout& layout);

}  // namespace lattice
