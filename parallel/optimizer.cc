// AdamW on fp32 main parameters over runs of the shard (the whole model when not sharded), the
// gradient views the norm counts, the write-back (copy or cast, or overlapped all-gather in the
// parameters' dtype), checkpoint state.
#include "parallel/optimizer.h"

#include <algorithm>
#include <array>

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
    const int64_t lo = g.block_begin(buckets->dp_rank());
    slices.push_back({lo, std::min(g.end, lo + g.shard_numel), g.shard_offset});
  }
  return slices;
}

// src into dst (f32 both): to the host without the host waiting where the device can.
Event copy_piece(const Tensor& src, Tensor& dst) {
  if (dst.device() == Device::kCpu && src.device() != Device::kCpu) return ops::copy_to_host_async(src, dst);
  ops::copy(src, dst);
  return Event();
}

}  // namespace

Optimizer::Optimizer(ParamGradBuffer& buffer, const OptimizerOptions& options)
    : Optimizer(buffer, nullptr, options) {}

Optimizer::Optimizer(GradBuckets& buckets, const OptimizerOptions& options)
    : Optimizer(buckets.buffer(), &buckets, options) {
  LATTICE_CHECK(buckets.options().reduce_scatter,
                "a sharded Optimizer needs gradient buckets built with reduce_scatter = true");
}

Optimizer::Optimizer(ParamGradBuffer& buffer, GradBuckets* buckets, const OptimizerOptions& options)
    : buffer_(buffer), buckets_(buckets), options_(options) {
  // Runs of the weight-decay and replica properties cut to this rank's slices; a piece extends
  // the previous one when both continue it. The gradients lie at the shard offsets, or, when the
  // buckets reduce in place, at the flat ones.
  const bool grads_in_place = buckets != nullptr && buckets->in_place();
  for (const Slice& s : shard_slices(buffer, buckets)) {
    // The norm's views never span two slices: the same views (and sums) whether the slices are
    // adjacent (packed) or not (in place).
    const size_t slice_first_range = norm_ranges_.size();
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
      const int64_t at = grads_in_place ? a : s.shard_offset + (a - s.lo);
      if (norm_ranges_.size() > slice_first_range && norm_ranges_.back().first + norm_ranges_.back().second == at)
        norm_ranges_.back().second += b - a;
      else
        norm_ranges_.emplace_back(at, b - a);
    }
  }
  for (const Run& run : runs_)
    shard_runs_.push_back({run.shard_offset, run.numel, run.decay, grads_in_place ? run.flat_offset : -1});
  const DeviceContext& ctx = buffer.context();
  const int64_t n = buckets != nullptr ? buckets->shard_numel() : buffer.numel();
  exp_avg_ = ctx.zeros({n}, DType::kF32);
  exp_avg_sq_ = ctx.zeros({n}, DType::kF32);
  // fp32 parameters are their own main parameters, unsharded or, with in-place buckets, sharded (a
  // rank's shard is its blocks of the flat values, beside its gradients'): no second fp32 copy of
  // them (Megatron keeps none either). Otherwise the main parameters are a copy, which the bf16
  // rounding or the write-back's gathers read.
  main_is_params_ = buffer.param_dtype() == DType::kF32 && (buckets == nullptr || grads_in_place);
  if (main_is_params_) {
    main_ = buffer.flat_values();
  } else {
    main_ = ctx.zeros({n}, DType::kF32);
    take_shard(buffer.flat_values(), 0, main_);
  }
  if (buckets == nullptr) return;
  const int dp = buckets->dp_size();
  staging_.resize(buckets->buckets().size());
  gathers_.resize(buckets->buckets().size());
  for (size_t b = 0; b < buckets->buckets().size(); ++b) {
    const GradBucket& g = buckets->buckets()[b];
    if (g.padded_numel(dp) != g.numel()) staging_[b] = ctx.zeros({g.padded_numel(dp)}, buffer.param_dtype());
  }
  // bf16 parameters: AdamW writes the rounding of the shard where the all-gather reads it — in place,
  // this rank's block of each bucket in the parameters themselves (Megatron's); else a send buffer.
  if (buffer.param_dtype() != DType::kF32 && !grads_in_place) send_ = ctx.zeros({n}, buffer.param_dtype());
}

Optimizer::~Optimizer() {
  try {
    wait_all();
  } catch (...) {
    // Destructors must not throw; a hung gather ends the job through the watchdog anyway.
  }
}

void Optimizer::set_initial_value(size_t param, const Tensor& fp32) {
  Tensor& value = buffer_.value(param);
  LATTICE_CHECK(fp32.dtype() == DType::kF32 && fp32.shape() == value.shape(),
                "Optimizer::set_initial_value: {} for parameter {}", fp32.describe(), value.describe());
  if (fp32.raw() != value.raw()) ops::cast(fp32, value);
  if (!main_is_params_) take_shard(fp32, buffer_.offset(param), main_);
}

void Optimizer::take_shard(const Tensor& part, int64_t part_begin, Tensor& shard) const {
  const int64_t part_end = part_begin + part.numel();
  for (const Run& run : runs_) {
    const int64_t a = std::max(part_begin, run.flat_offset), b = std::min(part_end, run.flat_offset + run.numel);
    if (a >= b) continue;
    Tensor dst = shard.slice_flat(run.shard_offset + (a - run.flat_offset), {b - a});
    const Tensor src = part.slice_flat(a - part_begin, {b - a});
    // bf16 values are widened.
    if (src.dtype() == dst.dtype())
      ops::copy(src, dst);
    else
      ops::cast(src, dst);
  }
}

const Tensor& Optimizer::grads() const { return buckets_ != nullptr ? buckets_->reduced_grads() : buffer_.flat_grads(); }

bool Optimizer::values_gather_in_place() const { return buckets_ != nullptr && buckets_->in_place(); }

Tensor& Optimizer::state(StateKind kind) {
  return kind == StateKind::kMainParams ? main_ : kind == StateKind::kExpAvg ? exp_avg_ : exp_avg_sq_;
}

Tensor Optimizer::bucket_shard(StateKind kind, const GradBucket& g) {
  // Sharded fp32 main parameters are the flat values: the shard is this rank's block of the bucket.
  if (kind == StateKind::kMainParams && main_is_params_)
    return main_.slice_flat(g.block_begin(buckets_->dp_rank()), {g.shard_numel});
  return state(kind).slice_flat(g.shard_offset, {g.shard_numel});
}

int64_t state_gather_numel(const std::vector<GradBucket>& buckets, int dp, int64_t gather_bytes) {
  int64_t largest = 0;
  for (const GradBucket& g : buckets) largest = std::max(largest, g.padded_numel(dp));
  const int64_t per_rank = std::max<int64_t>(1, gather_bytes / static_cast<int64_t>(sizeof(float)) / dp);
  return std::min(largest, per_rank * dp);
}

void Optimizer::reserve_state_copies() {
  if (buckets_ == nullptr || state_buffer_.defined()) return;
  state_buffer_ = buffer_.context().zeros(
      {state_gather_numel(buckets_->buckets(), buckets_->dp_size(), options_.state_gather_bytes)}, DType::kF32);
}

Event Optimizer::copy_state(const std::vector<StatePiece>& pieces, bool moments) {
  wait_all();  // the parameters' gathers use the staging buffers, and a save reads settled state
  std::vector<StateKind> kinds = {StateKind::kMainParams};
  if (moments) kinds.insert(kinds.end(), {StateKind::kExpAvg, StateKind::kExpAvgSq});
  for (const StatePiece& p : pieces) {
    LATTICE_CHECK(moments || p.kind == StateKind::kMainParams, "Optimizer::copy_state: a moment asked without moments");
    LATTICE_CHECK(p.dst.dtype() == DType::kF32 && p.flat_offset >= 0 && p.flat_offset + p.dst.numel() <= buffer_.numel(),
                  "Optimizer::copy_state: piece {} at {} of a flat state of {}", p.dst.describe(), p.flat_offset,
                  buffer_.numel());
  }
  Event last;
  if (buckets_ == nullptr) {
    for (const StatePiece& p : pieces) {
      Tensor dst = p.dst;
      last = copy_piece(state(p.kind).slice_flat(p.flat_offset, {dst.numel()}), dst);
    }
    return last;
  }
  // The pieces of each bucket.
  const auto& bs = buckets_->buckets();
  std::vector<std::vector<const StatePiece*>> in_bucket(bs.size());
  for (const StatePiece& p : pieces) {
    size_t b = 0;
    while (b < bs.size() && !(bs[b].begin <= p.flat_offset && p.flat_offset + p.dst.numel() <= bs[b].end)) ++b;
    LATTICE_CHECK(b < bs.size(), "Optimizer::copy_state: flat elements [{}, {}) span two gradient buckets",
                  p.flat_offset, p.flat_offset + p.dst.numel());
    in_bucket[b].push_back(&p);
  }
  reserve_state_copies();
  state_copies_.synchronize();  // the last call's copies out of the buffer (a save's may overlap training)
  Communicator& dp = buckets_->comm();
  const int64_t per_rank = state_buffer_.numel() / dp.size();  // shard elements of each rank per gather
  for (StateKind kind : kinds) {
    // The same bucket order and chunks on every rank: gathering elements [k, k + len) of every rank's
    // slice puts rank r's at r × len of the buffer; they are bucket elements r × shard_numel + k on.
    // A whole slice (len = shard_numel) lands as the padded bucket itself, in one run.
    for (size_t b = bs.size(); b-- > 0;) {
      const GradBucket& g = bs[b];
      if (g.numel() == 0) continue;
      for (int64_t k = 0; k < g.shard_numel; k += per_rank) {
        const int64_t len = std::min(per_rank, g.shard_numel - k);
        last.synchronize();  // the previous gather's copies out of the buffer are done
        Tensor gathered = state_buffer_.slice_flat(0, {len * dp.size()});
        dp.all_gather(bucket_shard(kind, g).slice_flat(k, {len}), gathered);
        // Runs of the buffer: (first flat element, buffer offset, elements).
        std::vector<std::array<int64_t, 3>> runs;
        if (len == g.shard_numel) {
          runs.push_back({g.begin, 0, len * dp.size()});
        } else {
          for (int r = 0; r < dp.size(); ++r) runs.push_back({g.block_begin(r) + k, r * len, len});
        }
        for (const StatePiece* p : in_bucket[b]) {
          if (p->kind != kind) continue;
          for (const auto& [flat, at, n] : runs) {
            const int64_t lo = std::max(flat, p->flat_offset), hi = std::min(flat + n, p->flat_offset + p->dst.numel());
            if (lo >= hi) continue;
            Tensor dst = p->dst.slice_flat(lo - p->flat_offset, {hi - lo});
            last = copy_piece(gathered.slice_flat(at + (lo - flat), {hi - lo}), dst);
          }
        }
      }
    }
  }
  state_copies_ = last;
  return last;
}

std::vector<StatePiece> Optimizer::whole_state_pieces(StateKind kind, const Tensor& flat) const {
  std::vector<StatePiece> pieces;
  for (const GradBucket& g : buckets_->buckets()) {
    if (g.numel() > 0) pieces.push_back({kind, g.begin, flat.slice_flat(g.begin, {g.numel()})});
  }
  return pieces;
}

FlatOptimizerState Optimizer::gather_state() {
  wait_all();
  if (buckets_ == nullptr) return {main_, exp_avg_, exp_avg_sq_};
  const DeviceContext& ctx = buffer_.context();
  FlatOptimizerState flat{ctx.zeros({buffer_.numel()}), ctx.zeros({buffer_.numel()}), ctx.zeros({buffer_.numel()})};
  std::vector<StatePiece> pieces;
  for (auto [kind, t] : {std::pair{StateKind::kMainParams, &flat.main_params}, {StateKind::kExpAvg, &flat.exp_avg},
                         {StateKind::kExpAvgSq, &flat.exp_avg_sq}}) {
    const std::vector<StatePiece> more = whole_state_pieces(kind, *t);
    pieces.insert(pieces.end(), more.begin(), more.end());
  }
  copy_state(pieces, /*moments=*/true).synchronize();
  return flat;
}

Tensor Optimizer::gather_main_params() {
  wait_all();
  if (buffer_.param_dtype() == DType::kF32) return buffer_.flat_values();
  if (buckets_ == nullptr) return main_;
  Tensor flat = buffer_.context().zeros({buffer_.numel()});
  copy_state(whole_state_pieces(StateKind::kMainParams, flat), /*moments=*/false).synchronize();
  return flat;
}

std::vector<Optimizer::StateRange> Optimizer::state_ranges() const {
  std::vector<StateRange> ranges;
  for (const Slice& s : shard_slices(buffer_, buckets_))
    if (s.hi > s.lo) ranges.push_back({s.lo, s.hi - s.lo, s.shard_offset, main_is_params_ ? s.lo : s.shard_offset});
  return ranges;
}

void Optimizer::params_from_main() {
  wait_all();
  if (main_is_params_ && buckets_ == nullptr) return;
  Tensor& values = buffer_.flat_values();
  if (buckets_ == nullptr) {
    ops::cast(main_, values);
    return;
  }
  // Each rank rounds its shard to where the write-back's all-gathers read it, as step() does (fp32
  // parameters gather the main shard itself), and the gathers bring every rank the whole model.
  if (send_.defined()) {
    ops::cast(main_, send_);
  } else if (values_gather_in_place() && !main_is_params_) {
    for (const Run& run : runs_) {
      Tensor dst = values.slice_flat(run.flat_offset, {run.numel});
      ops::cast(main_.slice_flat(run.shard_offset, {run.numel}), dst);
    }
  }
  write_back_params();
  wait_all();
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
    take_shard(buffer_.flat_values(), 0, main_);
  }
  // bf16 parameters take the updated main parameters' rounding in the same pass (unsharded: the
  // model's own; sharded: this rank's blocks of them, which the all-gathers read in place, or the
  // send buffer); fp32 ones are the main parameters (unsharded, or in place at the gradients'
  // offsets), or gather the packed main shard as it is.
  Tensor rounded;
  if (!main_is_params_) rounded = buckets_ == nullptr || values_gather_in_place() ? buffer_.flat_values() : send_;
  adamw_update_runs(main_, grads(), exp_avg_, exp_avg_sq_, shard_runs_,
                    {options_.beta1, options_.beta2, options_.eps, options_.weight_decay}, lr, step_count_,
                    grad_scale, rounded, main_is_params_ ? ValuesAt::kGradients : ValuesAt::kMoments);
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
    // The shard's bf16 rounding, which step() wrote into this rank's block of the parameters (in
    // place) or into send_ (its padding stays zero); fp32 parameters gather the main shard, in
    // place the block itself.
    Tensor in = values_gather_in_place()
                    ? values.slice_flat(g.block_begin(buckets_->dp_rank()), {g.shard_numel})
                    : (send_.defined() ? send_ : main_).slice_flat(g.shard_offset, {g.shard_numel});
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
