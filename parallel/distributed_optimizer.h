// DistributedOptimizer: ZeRO-1 AdamW (Megatron's distributed optimizer). Each dp rank keeps fp32
// master weights and moments for its 1/dp shard only, steps them, and all-gathers the parameters.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/adamw_runs.h"
#include "kernels/tensor.h"
#include "model/parameter_store.h"
#include "parallel/communicator.h"
#include "parallel/grad_buckets.h"

namespace lattice {

// The AdamW hyper-parameters (parallel/ does not depend on trainer/'s config; the trainer copies
// its OptimizerConfig into this). Decay applies only where ParamSpec::weight_decay.
struct DistAdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool overlap_param_gather = false;
};

class DistributedOptimizer {
 public:
  // `buckets` must be in reduce_scatter mode; it and its store and communicator must outlive this.
  // The shard layout is the buckets' (see GradBucket): this rank owns its slice of every bucket.
  // Master weights are copied from the store's values now (all ranks must hold the same values).
  DistributedOptimizer(GradBuckets& buckets, const DistAdamWConfig& config);
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // Sum of squares of this rank's shard of the (reduced) mean gradient, in double: call after
  // buckets.finish(). Padding is zero, so over all dp ranks every element counts exactly once.
  // Parameters flagged ParamSpec::replica (another rank holds the counted copy) are left out.
  double local_grad_sum_squares() const;
  // sqrt of local_grad_sum_squares() summed over the dp group. The partial sums are all-gathered as
  // exact doubles and added in rank order, so every rank gets the bit-identical norm. (With TP/PP
  // the trainer also sums over those groups; this is the dp-only norm.)
  double grad_norm();

  // One AdamW step on the local shard (step_count() += 1; gradients times grad_scale first), then
  // the all-gather of the updated parameters into every rank's store values, bucket by bucket.
  // Without overlap_param_gather it returns with the gathers done; with it, the gathers are in
  // flight and the caller must wait_param_gather(bucket) (or wait_param(i) / wait_all()) before
  // reading those parameters (the next forward), and before the next step().
  void step(double lr, float grad_scale);

  void wait_param_gather(size_t bucket);
  void wait_param(size_t param_index) { wait_param_gather(buckets_.bucket_of_param(param_index)); }
  void wait_all();
  // Gathers launched and not yet waited for (tests).
  int pending_param_gathers() const;

  // Re-reads the master shard from the store's values (after loading a checkpoint into the store).
  void reload_master_from_values();

  // Checkpoints store the moments in the store's flat layout, whatever the sharding (so any layout
  // can load them). gather_moments: a collective over dp — every rank gets the whole flat-layout
  // exp_avg / exp_avg_sq (store.numel() elements each), one all_gather per bucket and moment.
  // load_moments: the reverse, no communication — this rank's runs of the flat-layout moments are
  // copied into its shard (padding stays zero). Both wait for pending parameter gathers first.
  void gather_moments(Tensor& flat_exp_avg, Tensor& flat_exp_avg_sq);
  void load_moments(const Tensor& flat_exp_avg, const Tensor& flat_exp_avg_sq);

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps);

  // Local shard state in the buckets' shard layout (GradBucket::shard_offset / shard_numel).
  Tensor& master() { return master_; }
  Tensor& exp_avg() { return exp_avg_; }
  Tensor& exp_avg_sq() { return exp_avg_sq_; }
  const DistAdamWConfig& config() const { return config_; }

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
  GradBuckets& buckets_;
  DistAdamWConfig config_;
  std::vector<Run> runs_;
  std::vector<AdamWRun> shard_runs_;  // runs_ addressed by shard offset, as AdamW steps them
  std::vector<std::pair<int64_t, int64_t>> norm_ranges_;  // (shard offset, numel) of non-replica elements
  Tensor master_;
  Tensor exp_avg_;
  Tensor exp_avg_sq_;
  std::vector<Tensor> staging_;         // per bucket whose numel % dp != 0: padded gather output
  std::vector<CommHandle> gathers_;     // per bucket
  int64_t step_count_ = 0;
};

}  // namespace lattice
