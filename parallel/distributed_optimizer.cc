// ZeRO-1 AdamW over the gradient buckets' shard layout: per-(parameter ∩ shard) runs, the dp grad
// norm, and the (overlapped) all-gather of the updated parameters.
#include "parallel/distributed_optimizer.h"

#include <cmath>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "parallel/exact_sum.h"

namespace lattice {

DistributedOptimizer::DistributedOptimizer(GradBuckets& buckets, const DistAdamWConfig& config)
    : buckets_(buckets), config_(config) {
  LATTICE_CHECK(buckets.options().reduce_scatter,
                "DistributedOptimizer: the gradient buckets must be built with reduce_scatter = true");
  const ParameterStore& store = buckets.store();
  const int dp = buckets.dp_size(), r = buckets.dp_rank();
  std::vector<int64_t> offsets(store.count() + 1, 0);
  for (size_t i = 0; i < store.count(); ++i) offsets[i + 1] = offsets[i] + shape_numel(store.spec(i).shape);
  for (const GradBucket& g : buckets.buckets()) {
    // This rank's slice of the bucket in flat coordinates, clipped to the real (unpadded) elements.
    const int64_t lo = g.begin + r * g.shard_numel;
    const int64_t hi = std::min(g.end, lo + g.shard_numel);
    for (size_t p = g.first_param; p <= g.last_param && lo < hi; ++p) {
      const int64_t a = std::max(lo, offsets[p]), b = std::min(hi, offsets[p + 1]);
      if (a >= b) continue;
      const bool decay = store.spec(p).weight_decay;
      const int64_t shard_off = g.shard_offset + (a - lo);
      if (!store.spec(p).replica) {
        if (!norm_ranges_.empty() && norm_ranges_.back().first + norm_ranges_.back().second == shard_off)
          norm_ranges_.back().second += b - a;
        else
          norm_ranges_.emplace_back(shard_off, b - a);
      }
      if (!runs_.empty() && runs_.back().decay == decay && runs_.back().flat_offset + runs_.back().numel == a &&
          runs_.back().shard_offset + runs_.back().numel == shard_off) {
        runs_.back().numel += b - a;
      } else {
        runs_.push_back({shard_off, a, b - a, decay});
      }
    }
  }
  (void)dp;
  for (const Run& run : runs_) shard_runs_.push_back({run.shard_offset, run.numel, run.decay});
  const Device device = store.flat_values().device();
  const int64_t n = buckets.shard_numel();
  master_ = Tensor::zeros({n}, DType::kF32, device);
  exp_avg_ = Tensor::zeros({n}, DType::kF32, device);
  exp_avg_sq_ = Tensor::zeros({n}, DType::kF32, device);
  staging_.resize(buckets.buckets().size());
  gathers_.resize(buckets.buckets().size());
  for (size_t b = 0; b < buckets.buckets().size(); ++b) {
    const GradBucket& g = buckets.buckets()[b];
    if (g.padded_numel(dp) != g.numel()) staging_[b] = Tensor::zeros({g.padded_numel(dp)}, DType::kF32, device);
  }
  reload_master_from_values();
}

DistributedOptimizer::~DistributedOptimizer() {
  try {
    wait_all();
  } catch (...) {
    // Destructors must not throw; a hung gather ends the job through the watchdog anyway.
  }
}

void DistributedOptimizer::reload_master_from_values() {
  wait_all();
  Tensor& values = buckets_.store().flat_values();
  for (const Run& run : runs_) {
    Tensor src = values.slice_flat(run.flat_offset, {run.numel});
    Tensor dst = master_.slice_flat(run.shard_offset, {run.numel});
    ops::copy(src, dst);
  }
}

void DistributedOptimizer::gather_moments(Tensor& flat_exp_avg, Tensor& flat_exp_avg_sq) {
  wait_all();  // the staging buffers of padded buckets are free again
  const int64_t numel = buckets_.store().numel();
  LATTICE_CHECK(flat_exp_avg.numel() == numel && flat_exp_avg_sq.numel() == numel,
                "gather_moments: targets of {} and {} elements for a store of {}", flat_exp_avg.numel(),
                flat_exp_avg_sq.numel(), numel);
  Communicator& dp = buckets_.comm();
  const auto& bs = buckets_.buckets();
  for (auto [shard, flat] : {std::pair<Tensor*, Tensor*>{&exp_avg_, &flat_exp_avg}, {&exp_avg_sq_, &flat_exp_avg_sq}}) {
    // The same bucket order on every rank, as in step(): rank r's slice lands at r × shard_numel of
    // the bucket, which is its place in the flat layout (the padding falls past the bucket's end).
    for (size_t b = bs.size(); b-- > 0;) {
      const GradBucket& g = bs[b];
      if (g.numel() == 0) continue;
      Tensor in = shard->slice_flat(g.shard_offset, {g.shard_numel});
      Tensor dst = flat->slice_flat(g.begin, {g.numel()});
      const bool padded = g.padded_numel(dp.size()) != g.numel();
      dp.all_gather(in, padded ? staging_[b] : dst);
      if (padded) {
        Tensor head = staging_[b].slice_flat(0, {g.numel()});
        ops::copy(head, dst);
      }
    }
  }
}

void DistributedOptimizer::load_moments(const Tensor& flat_exp_avg, const Tensor& flat_exp_avg_sq) {
  wait_all();
  const int64_t numel = buckets_.store().numel();
  LATTICE_CHECK(flat_exp_avg.numel() == numel && flat_exp_avg_sq.numel() == numel,
                "load_moments: sources of {} and {} elements for a store of {}", flat_exp_avg.numel(),
                flat_exp_avg_sq.numel(), numel);
  ops::fill(exp_avg_, 0.0f);
  ops::fill(exp_avg_sq_, 0.0f);
  for (const Run& run : runs_) {
    Tensor a = exp_avg_.slice_flat(run.shard_offset, {run.numel});
    Tensor b = exp_avg_sq_.slice_flat(run.shard_offset, {run.numel});
    ops::copy(flat_exp_avg.slice_flat(run.flat_offset, {run.numel}), a);
    ops::copy(flat_exp_avg_sq.slice_flat(run.flat_offset, {run.numel}), b);
  }
}

void DistributedOptimizer::set_step_count(int64_t steps) {
  LATTICE_CHECK(steps >= 0, "DistributedOptimizer: negative step count {}", steps);
  step_count_ = steps;
}

double DistributedOptimizer::local_grad_sum_squares() const {
  Tensor& g = const_cast<GradBuckets&>(buckets_).shard_grads();
  double sum = 0.0;
  for (const auto& [offset, numel] : norm_ranges_) sum += ops::sum_squares(g.slice_flat(offset, {numel}));
  return sum;
}

double DistributedOptimizer::grad_norm() { return std::sqrt(exact_sum(buckets_.comm(), local_grad_sum_squares())); }

void DistributedOptimizer::step(double lr, float grad_scale) {
  wait_all();
  ++step_count_;
  adamw_update_runs(master_, buckets_.shard_grads(), exp_avg_, exp_avg_sq_, shard_runs_,
                    {config_.beta1, config_.beta2, config_.eps, config_.weight_decay}, lr, step_count_, grad_scale);
  // Gather in forward order (the last bucket holds the first layers), the same on every rank.
  Communicator& dp = buckets_.comm();
  Tensor& values = buckets_.store().flat_values();
  const auto& bs = buckets_.buckets();
  for (size_t b = bs.size(); b-- > 0;) {
    const GradBucket& g = bs[b];
    if (g.numel() == 0) continue;
    Tensor in = master_.slice_flat(g.shard_offset, {g.shard_numel});
    Tensor out = g.padded_numel(dp.size()) != g.numel() ? staging_[b] : values.slice_flat(g.begin, {g.numel()});
    gathers_[b] = dp.all_gather_async(in, out);
  }
  if (!config_.overlap_param_gather) wait_all();
}

void DistributedOptimizer::wait_param_gather(size_t bucket) {
  LATTICE_CHECK(bucket < gathers_.size(), "DistributedOptimizer: bucket {} of {}", bucket, gathers_.size());
  if (!gathers_[bucket].pending()) return;
  gathers_[bucket].wait();
  const GradBucket& g = buckets_.buckets()[bucket];
  if (g.padded_numel(buckets_.dp_size()) != g.numel()) {
    Tensor head = staging_[bucket].slice_flat(0, {g.numel()});
    Tensor dst = buckets_.store().flat_values().slice_flat(g.begin, {g.numel()});
    ops::copy(head, dst);
  }
}

void DistributedOptimizer::wait_all() {
  for (size_t b = gathers_.size(); b-- > 0;) wait_param_gather(b);
}

int DistributedOptimizer::pending_param_gathers() const {
  int n = 0;
  for (const CommHandle& h : gathers_) n += h.pending() ? 1 : 0;
  return n;
}

}  // namespace lattice
