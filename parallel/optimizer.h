// Optimizer: AdamW that owns the fp32 main parameters and moments (Megatron's recipe) — of the
// whole model, or with the distributed optimizer (ZeRO-1) of this dp rank's 1/dp shard — and after
// each step writes the updated values back to the model's parameters in the buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/adamw_runs.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/grad_buckets.h"
#include "parallel/param_grad_buffer.h"

namespace lattice {

// The default OptimizerOptions::state_gather_bytes: large enough that a 25 MB bucket is one gather.
inline constexpr int64_t kStateGatherBytes = int64_t{64} << 20;

// The AdamW hyper-parameters (parallel/ does not depend on trainer/'s config; the trainer copies
// its OptimizerConfig into this). Decay applies only where ParamSpec::weight_decay.
struct OptimizerOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool overlap_param_gather = false;  // sharded only: the write-back all-gathers overlap the next forward
  // test only: steps AdamW on the compute copy, as if there were no fp32 master weights — the
  // master-weights test shows it fails. With non-f32 parameters every step first re-reads the main
  // parameters from the (rounded) buffer values, so updates below their resolution are lost.
  bool test_disable_main_params = false;
  // Sharded: a save gathers the state through one buffer of at most this many bytes (a bucket at a
  // time, in chunks of each rank's shard), not a whole bucket: a bucket holding one large parameter
  // (the embedding) would otherwise size it (1002 MiB for Llama 3 8B at TP2).
  int64_t state_gather_bytes = kStateGatherBytes;
};

// The optimizer state as checkpoints hold it, in the buffer's flat layout (numel() elements each).
struct FlatOptimizerState {
  Tensor main_params;
  Tensor exp_avg;
  Tensor exp_avg_sq;
};

enum class StateKind { kMainParams, kExpAvg, kExpAvgSq };

// A range of the whole model's optimizer state that a save wants: flat elements
// [flat_offset, flat_offset + dst.numel()) of `kind` into `dst` (f32, on the host or the buffer's
// device). The range lies within one gradient bucket (within one parameter always does).
struct StatePiece {
  StateKind kind = StateKind::kMainParams;
  int64_t flat_offset = 0;
  Tensor dst;
};

// The main parameters start from the buffer's values (widened when bf16); set_initial_value()
// then gives them, parameter by parameter, the exact fp32 initial values, which bf16 values alone
// would only hold rounded.
class Optimizer {
 public:
  // Whole model: steps every parameter on the buffer's gradients (one process, or data parallel
  // with all-reduced gradients: every rank takes the same step). `buffer` must outlive this.
  Optimizer(ParamGradBuffer& buffer, const OptimizerOptions& options);
  // Sharded (distributed optimizer): `buckets` must be in reduce_scatter mode; this rank owns its
  // slice of every bucket (see GradBucket). They, their buffer and communicator must outlive this.
  // The write-back all-gathers the parameters in their dtype (bf16: half the bytes of fp32).
  Optimizer(GradBuckets& buckets, const OptimizerOptions& options);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  bool sharded() const { return buckets_ != nullptr; }

  // Start-up, one parameter at a time (so that the rank's parameters never exist in fp32 beside
  // the optimizer's state): parameter i's exact fp32 initial values, f32 of its local shape on the
  // buffer's device, the same on every dp rank. The model's value takes them (rounded when bf16)
  // and the main parameters the part this rank holds (sharded: its shard's), with no
  // communication. `fp32` may be the parameter itself (f32).
  void set_initial_value(size_t param, const Tensor& fp32);

  // The views of this rank's part of the (reduced) gradient that the global norm counts, in a fixed
  // order: their sums of squares, added in that order, are this rank's share of the norm. Sharded,
  // over all dp ranks every element counts exactly once (padding is zero). Parameters flagged
  // ParamSpec::replica (another rank holds the counted copy) are left out. The sums are reduced on
  // the device and read back with the step's other values (trainer/step_readback.h).
  std::vector<Tensor> norm_grads() const;

  // One AdamW step on the main parameters (step_count() += 1; gradients times grad_scale first),
  // then write_back_params(). Sharded with overlap_param_gather, the write-back's all-gathers are in
  // flight on return: wait_param_gather(bucket) (or wait_param(i) / wait_all()) before reading
  // those parameters (the next forward). Unsharded these waits return at once.
  void step(double lr, float grad_scale);

  void wait_param_gather(size_t bucket);
  void wait_param(size_t param_index);
  void wait_all();
  // Gathers launched and not yet waited for (the trace's count of gathers overlapping the forward).
  int pending_param_gathers() const;

  // Checkpoints. copy_state() copies the whole model's state at `pieces` (main parameters, and the
  // moments when `moments`); sharded, it is a collective over dp (every rank passes the same
  // `moments`, each its own pieces): bucket by bucket, each state's shards are all-gathered into one
  // buffer (state_gather_numel(), a chunk of every rank's shard at a time where a bucket is larger)
  // and the pieces copied out of it, so no rank ever holds the whole model's state (Megatron's
  // distributed optimizer saves without one too). Copies to the host may still be
  // in flight on return: they are complete once the returned event is (not recorded: complete).
  // gather_state(): the whole state in new flat tensors (sharded: copy_state into them); for tests
  // and small models. Unsharded it returns the optimizer's own tensors, no copy.
  Event copy_state(const std::vector<StatePiece>& pieces, bool moments);
  FlatOptimizerState gather_state();
  // Allocates copy_state's bucket buffer now (sharded), rather than in the first save.
  void reserve_state_copies();
  // Checkpoint loads fill this rank's state in place: main_params(), exp_avg() and exp_avg_sq() at
  // state_ranges() from the whole model's flat state, the rest (padding) zero — sharded, only the
  // shard is ever read or held (Megatron's distributed checkpoints load so too) — then call
  // params_from_main(): the model's parameters from the main parameters (sharded: each rank rounds
  // its shard and the write-back all-gathers them, a collective over dp).
  struct StateRange {
    int64_t flat_offset;   // in the buffer's flat layout
    int64_t numel;
    int64_t state_offset;  // in the moments
    int64_t main_offset;   // in main_params(): state_offset, or flat_offset where they are the parameters
  };
  std::vector<StateRange> state_ranges() const;
  void params_from_main();
  // The whole model's fp32 master weights in the buffer's flat layout (what an export writes): fp32
  // parameters are them (once the write-back's gathers are waited for); bf16 ones are only their
  // rounding, so unsharded main_params(), sharded the main shards gathered into a new tensor (a
  // collective over dp).
  Tensor gather_main_params();

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

  // This rank's state in the shard layout (sharded: GradBucket::shard_offset / shard_numel;
  // unsharded: the buffer's flat layout). fp32 parameters are their own main parameters, unsharded
  // and with in-place buckets: main_params() is then the buffer's flat values, the shard at this
  // rank's blocks of the buckets (state_ranges()' main_offset).
  Tensor& main_params() { return main_; }
  Tensor& exp_avg() { return exp_avg_; }
  Tensor& exp_avg_sq() { return exp_avg_sq_; }
  const OptimizerOptions& options() const { return options_; }
  ParamGradBuffer& buffer() const { return buffer_; }

  // A maximal run of this rank's shard lying inside parameters that share one decay flag:
  // shard elements [shard_offset, shard_offset + numel) = flat elements [flat_offset, ...).
  struct Run {
    int64_t shard_offset;
    int64_t flat_offset;
    int64_t numel;
    bool decay;
  };
  const std::vector<Run>& runs() const { return runs_; }

 private:
  Optimizer(ParamGradBuffer& buffer, GradBuckets* buckets, const OptimizerOptions& options);
  // How a step's main parameters reach the model's parameters, after step()'s AdamW has written
  // their bf16 rounding (unsharded: into the parameters; sharded: into send_): nothing more
  // unsharded; sharded, each bucket's all-gather of this rank's shard (send_, or fp32 main_).
  void write_back_params();
  // shard (this rank's state layout) at this rank's runs = `part`, flat elements [part_begin,
  // part_begin + part.numel()) of the buffer's layout (the whole of it, or one parameter; on any
  // device), cast to f32. Elements outside it, and padding, are left as they are.
  void take_shard(const Tensor& part, int64_t part_begin, Tensor& shard) const;
  Tensor& state(StateKind kind);
  // Sharded: this rank's shard of bucket g's `kind`, shard_numel elements.
  Tensor bucket_shard(StateKind kind, const GradBucket& g);
  // Sharded: copy_state's pieces that cover `flat` (the whole model's `kind`), one per bucket.
  std::vector<StatePiece> whole_state_pieces(StateKind kind, const Tensor& flat) const;
  const Tensor& grads() const;
  // In-place buckets: the write-back all-gathers within the parameters, from this rank's blocks
  // (bf16: the rounding step() writes there; fp32: the main shard, which lies there).
  bool values_gather_in_place() const;

  ParamGradBuffer& buffer_;
  GradBuckets* buckets_;  // nullptr: not sharded
  OptimizerOptions options_;
  std::vector<Run> runs_;
  std::vector<AdamWRun> shard_runs_;  // runs_ addressed by shard offset, as AdamW steps them
  std::vector<std::pair<int64_t, int64_t>> norm_ranges_;  // (offset in grads(), numel) of non-replica elements
  Tensor main_;
  bool main_is_params_ = false;  // fp32, unsharded or in place: main_ is the buffer's flat values themselves
  Tensor exp_avg_;
  Tensor exp_avg_sq_;
  std::vector<Tensor> staging_;         // per bucket whose numel % dp != 0: padded gather output, param dtype
  Tensor state_buffer_;                 // copy_state's: f32, state_gather_numel() elements
  Event state_copies_;                  // the last copy_state's copies out of state_buffer_
  Tensor send_;                         // non-f32 parameters, not in place: this rank's shard cast for the gather
  std::vector<CommHandle> gathers_;     // per bucket
  int64_t step_count_ = 0;
};

// The elements of the buffer a sharded Optimizer's copy_state() gathers through (for the memory
// plan too): the largest padded bucket, or fewer (a whole number of elements per dp rank) where that
// is more than `gather_bytes` of f32.
int64_t state_gather_numel(const std::vector<GradBucket>& buckets, int dp, int64_t gather_bytes);

}  // namespace lattice
