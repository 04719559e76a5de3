// AdamW on fp32 main parameters over runs of the shard (the whole model when not sharded), the
// gradient views the norm counts, the write-back (copy or cast, or overlapped all-gather in the
// parameters' dtype), checkpoint state.
#include "parallel/optimizer.h"

#include <algorithm>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

// A range of flat elements [lo, hi) that lands at `shard_offset` of this rank's state.
struct Slice {
  int64_t lo, hi, shard_offset;
};

// The ranges this rank's state covers: the whole buffer, or its slice of every bucket clipped to
// the real (unpadded) elements, in bucket order (the shard layout).
std::vector<Slice> shard_slices(const ParamLayout& layout, const GradBuckets* buckets) {
  if (buckets == nullptr) return {{0, layout.numel(), 0}};
  std::vector<Slice> slices;
  for (const GradBucket& g : buckets->buckets()) {
    const int64_t lo = g.begin + buckets->dp_rank() * g.shard_numel;
    slices.push_back({lo, std::min(g.end, lo + g.shard_numel), g.shard_offset});
  }
  return slices;
}

}  // namespace

Optimizer::Optimizer(ParamGradBuffer& buffer, const OptimizerOptions& options, const Tensor& initial_main)
    : Optimizer(buffer, nullptr, options, initial_main) {}

Optimizer::Optimizer(GradBuckets& buckets, const OptimizerOptions& options, const Tensor& initial_main)
    : Optimizer(buckets.buffer(), &buckets, options, initial_main) {
  LATTICE_CHECK(buckets.options().reduce_scatter,
                "a sharded Optimizer needs gradient buckets built with reduce_scatter = true");
}

Optimizer::Optimizer(ParamGradBuffer& buffer, GradBuckets* buckets, const OptimizerOptions& options,
                     const Tensor& initial_main)
    : buffer_(buffer), buckets_(buckets), options_(options) {
  // Runs of the weight-decay and replica properties cut to this rank's slices; a piece extends
  // the previous one when both continue it.
  for (const Slice& s : shard_slices(buffer, buckets)) {
    for (const ParamRun& run : buffer.runs(ParamProperty::kWeightDecay)) {
      const int64_t a = std::max(s.lo, run.offset), b = std::min(s.hi, run.offset + run.numel);
      if (a >= b) continue;
      const int64_t shard_off = s.shard_offset + (a - s.lo);
      if (!runs_.empty() && runs_.back().decay == run.value && runs_.back().flat_offset + runs_.back().numel == a &&
          runs_.back().shard_offset + runs_.back().numel == shard_off)
        runs_.back().numel += b - a;
      else
        runs_.push_back({shard_off, a, b - a, run.value});
    }
    for (const ParamRun& run : buffer.runs(ParamProperty::kReplica)) {
      const int64_t a = std::max(s.lo, run.offset), b = std::min(s.hi, run.offset + run.numel);
      if (run.value || a >= b) continue;
      const int64_t shard_off = s.shard_offset + (a - s.lo);
      if (!norm_ranges_.empty() && norm_ranges_.back().first + norm_ranges_.back().second == shard_off)
        norm_ranges_.back().second += b - a;
      else
        norm_ranges_.emplace_back(shard_off, b - a);
    }
  }
  for (const Run& run : runs_) shard_runs_.push_back({run.shard_offset, run.numel, run.decay});
  const DeviceContext& ctx = buffer.context();
  const int64_t n = buckets != nullptr ? buckets->shard_numel() : buffer.numel();
  exp_avg_ = ctx.zeros({n}, DType::kF32);
  exp_avg_sq_ = ctx.zeros({n}, DType::kF32);
  if (initial_main.defined()) {
    LATTICE_CHECK(initial_main.dtype() == DType::kF32 && initial_main.numel() == buffer.numel() &&
                      initial_main.device() == buffer.device(),
                  "Optimizer: initial_main {} must be f32 in the flat layout of the parameters {}",
                  initial_main.describe(), buffer.flat_values().describe());
    ops::cast(initial_main, buffer.flat_values());
  }
  // Unsharded fp32 parameters are their own main parameters: no second fp32 copy of the model
  // (Megatron keeps none either). Otherwise the main parameters are a copy, which
  // write_back_params casts from.
  main_is_params_ = buckets == nullptr && buffer.param_dtype() == DType::kF32;
  if (main_is_params_) {
    main_ = buffer.flat_values();
  } else if (buckets == nullptr && initial_main.defined()) {
    main_ = initial_main;  // unsharded, the exact fp32 init is the main parameters' layout: adopt it, no copy
  } else {
    main_ = ctx.zeros({n}, DType::kF32);
    take_shard(initial_main.defined() ? initial_main : buffer.flat_values(), main_);
  }
  if (buckets == nullptr) {
    flat_state_ = {main_, exp_avg_, exp_avg_sq_};
    return;
  }
  const int dp = buckets->dp_size();
  staging_.resize(buckets->buckets().size());
  gathers_.resize(buckets->buckets().size());
  for (size_t b = 0; b < buckets->buckets().size(); ++b) {
    const GradBucket& g = buckets->buckets()[b];
    if (g.padded_numel(dp) != g.numel()) staging_[b] = ctx.zeros({g.padded_numel(dp)}, buffer.param_dtype());
  }
  if (buffer.param_dtype() != DType::kF32) send_ = ctx.zeros({n}, buffer.param_dtype());
}

Optimizer::~Optimizer() {
  try {
    wait_all();
  } catch (...) {
    // Destructors must not throw; a hung gather ends the job through the watchdog anyway.
  }
}

void Optimizer::take_shard(const Tensor& flat, Tensor& shard) const {
  for (const Run& run : runs_) {
    Tensor dst = shard.slice_flat(run.shard_offset, {run.numel});
    ops::cast(flat.slice_flat(run.flat_offset, {run.numel}), dst);
  }
}

const Tensor& Optimizer::grads() const { return buckets_ != nullptr ? buckets_->shard_grads() : buffer_.flat_grads(); }

FlatOptimizerState& Optimizer::flat_state() {
  if (!flat_state_.main_params.defined()) {
    for (Tensor* t : {&flat_state_.main_params, &flat_state_.exp_avg, &flat_state_.exp_avg_sq})
      *t = buffer_.context().zeros({buffer_.numel()}, DType::kF32);
  }
  return flat_state_;
}

void Optimizer::gather_state() {
  wait_all();  // the staging buffers of padded buckets are free again
  if (buckets_ == nullptr) return;  // the flat state is the optimizer's own
  FlatOptimizerState& flat = flat_state();
  gather_shards({{&main_, &flat.main_params}, {&exp_avg_, &flat.exp_avg}, {&exp_avg_sq_, &flat.exp_avg_sq}});
}

const Tensor& Optimizer::gather_main_params() {
  wait_all();
  if (buffer_.param_dtype() == DType::kF32) return buffer_.flat_values();
  if (buckets_ == nullptr) return main_;
  gather_shards({{&main_, &flat_state().main_params}});
  return flat_state_.main_params;
}

void Optimizer::gather_shards(std::initializer_list<std::pair<Tensor*, Tensor*>> shards_and_flats) {
  Communicator& dp = buckets_->comm();
  const auto& bs = buckets_->buckets();
  // Padded buckets gather through f32 staging: the write-back's when the parameters are f32, else
  // made here (checkpoint and export time, not the step).
  std::vector<Tensor> staging = staging_;
  if (buffer_.param_dtype() != DType::kF32) {
    for (Tensor& t : staging) {
      if (t.defined()) t = buffer_.context().zeros({t.numel()}, DType::kF32);
    }
  }
  for (auto [shard, out] : shards_and_flats) {
    // The same bucket order on every rank, as in step(): rank r's slice lands at r × shard_numel of
    // the bucket, which is its place in the flat layout (the padding falls past the bucket's end).
    for (size_t b = bs.size(); b-- > 0;) {
      const GradBucket& g = bs[b];
      if (g.numel() == 0) continue;
      Tensor in = shard->slice_flat(g.shard_offset, {g.shard_numel});
      Tensor dst = out->slice_flat(g.begin, {g.numel()});
      const bool padded = g.padded_numel(dp.size()) != g.numel();
      dp.all_gather(in, padded ? staging[b] : dst);
      if (padded) ops::copy(staging[b].slice_flat(0, {g.numel()}), dst);
    }
  }
}

void Optimizer::load_state() {
  wait_all();
  FlatOptimizerState& flat = flat_state();
  if (buckets_ != nullptr) {
    for (auto [shard, in] : {std::pair<Tensor*, const Tensor*>{&main_, &flat.main_params}, {&exp_avg_, &flat.exp_avg},
                             {&exp_avg_sq_, &flat.exp_avg_sq}}) {
      ops::fill(*shard, 0.0f);
      take_shard(*in, *shard);
    }
  }
  // Every rank holds the whole flat main parameters here: no gather needed.
  if (!main_is_params_) ops::cast(flat.main_params, buffer_.flat_values());
}

void Optimizer::set_step_count(int64_t steps) {
  LATTICE_CHECK(steps >= 0, "Optimizer: negative step count {}", steps);
  step_count_ = steps;
}

std::vector<Tensor> Optimizer::norm_grads() const {
  const Tensor& g = grads();
  std::vector<Tensor> views;
  for (const auto& [offset, numel] : norm_ranges_) views.push_back(g.slice_flat(offset, {numel}));
  return views;
}

void Optimizer::step(double lr, float grad_scale) {
  wait_all();
  ++step_count_;
  if (options_.test_disable_main_params && buffer_.param_dtype() != DType::kF32) {
    take_shard(buffer_.flat_values(), main_);
  }
  // bf16 parameters take the updated main parameters' rounding in the same pass (unsharded: the
  // model's own; sharded: the send buffer the all-gathers read); fp32 ones are the main parameters
  // (unsharded) or gather them as they are.
  const Tensor rounded = buckets_ == nullptr ? (main_is_params_ ? Tensor{} : buffer_.flat_values()) : send_;
  adamw_update_runs(main_, grads(), exp_avg_, exp_avg_sq_, shard_runs_,
                    {options_.beta1, options_.beta2, options_.eps, options_.weight_decay}, lr, step_count_,
                    grad_scale, rounded);
  write_back_params();
}

void Optimizer::write_back_params() {
  if (buckets_ == nullptr) return;  // step() wrote bf16 parameters; fp32 ones are the main parameters
  Tensor& values = buffer_.flat_values();
  // Gather in forward order (the last bucket holds the first layers), the same on every rank.
  Communicator& dp = buckets_->comm();
  const auto& bs = buckets_->buckets();
  for (size_t b = bs.size(); b-- > 0;) {
    const GradBucket& g = bs[b];
    if (g.numel() == 0) continue;
    // send_ holds the shard's bf16 rounding (step() wrote it; its padding stays zero).
    Tensor in = (send_.defined() ? send_ : main_).slice_flat(g.shard_offset, {g.shard_numel});
    Tensor out = g.padded_numel(dp.size()) != g.numel() ? staging_[b] : values.slice_flat(g.begin, {g.numel()});
    gathers_[b] = dp.all_gather_async(in, out);
  }
  if (!options_.overlap_param_gather) wait_all();
}

void Optimizer::wait_param_gather(size_t bucket) {
  if (buckets_ == nullptr) return;
  LATTICE_CHECK(bucket < gathers_.size(), "Optimizer: bucket {} of {}", bucket, gathers_.size());
  if (!gathers_[bucket].pending()) return;
  gathers_[bucket].wait_on(buffer_.context().stream());  // what reads the parameters is ordered after
  const GradBucket& g = buckets_->buckets()[bucket];
  if (g.padded_numel(buckets_->dp_size()) != g.numel()) {
    Tensor dst = buffer_.flat_values().slice_flat(g.begin, {g.numel()});
    ops::copy(staging_[bucket].slice_flat(0, {g.numel()}), dst);
  }
}

void Optimizer::wait_param(size_t param_index) {
  if (buckets_ != nullptr) wait_param_gather(buckets_->bucket_of_param(param_index));
}

void Optimizer::wait_all() {
  for (size_t b = gathers_.size(); b-- > 0;) wait_param_gather(b);
}

int Optimizer::pending_param_gathers() const {
  int n = 0;
  for (const CommHandle& h : gathers_) n += h.pending() ? 1 : 0;
  return n;
}

}  // namespace lattice
