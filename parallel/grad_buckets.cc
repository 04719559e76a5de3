// Gradient buckets over the flat fp32 gradients and their (overlapped) data-parallel reduction.
#include "parallel/grad_buckets.h"

#include <algorithm>
#include <chrono>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

std::vector<GradBucket> make_grad_buckets(const ParamLayout& layout, double bucket_size_mb, int dp) {
  LATTICE_CHECK(dp >= 1, "make_grad_buckets: dp size {} < 1", dp);
  const size_t n = layout.count();
  const double limit_elems =
      bucket_size_mb > 0.0 ? bucket_size_mb * 1024.0 * 1024.0 / sizeof(float) : -1.0;
  std::vector<GradBucket> buckets;
  if (n == 0) return buckets;
  size_t last = n - 1;  // last parameter of the bucket being built
  for (size_t k = n; k-- > 0;) {
    const int64_t size = layout.offset(last + 1) - layout.offset(k);
    const bool close = k == 0 || (limit_elems > 0.0 && static_cast<double>(size) >= limit_elems);
    if (close) {
      GradBucket b;
      b.first_param = k;
      b.last_param = last;
      b.begin = layout.offset(k);
      b.end = layout.offset(last + 1);
      buckets.push_back(b);
      if (k > 0) last = k - 1;
    }
  }
  int64_t shard_offset = 0;
  for (GradBucket& b : buckets) {
    b.shard_numel = (b.numel() + dp - 1) / dp;
    b.shard_offset = shard_offset;
    shard_offset += b.shard_numel;
  }
  return buckets;
}

GradBuckets::GradBuckets(ParamGradBuffer& buffer, Communicator& dp, const GradBucketOptions& options)
    : buffer_(buffer),
      dp_(dp),
      options_(options),
      dp_size_(dp.size()),
      dp_rank_(dp.rank()),
      buckets_(make_grad_buckets(buffer, options.bucket_size_mb, dp.size())) {
  param_bucket_.assign(buffer.count(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p = buckets_[b].first_param; p <= buckets_[b].last_param; ++p) param_bucket_[p] = b;
  }
  ready_count_.assign(buckets_.size(), 0);
  param_ready_.assign(buffer.count(), 0);
  handles_.resize(buckets_.size());
  staging_.resize(buckets_.size());
  LATTICE_CHECK(options_.reduce_dtype == DType::kF32 || options_.reduce_dtype == DType::kBF16,
                "gradient buckets: reduce_dtype {} (f32 or bf16)", dtype_name(options_.reduce_dtype));
  const bool narrow = options_.reduce_dtype != buffer.grad_dtype();
  const DeviceContext& ctx = buffer.context();
  bool padded = false;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const GradBucket& g = buckets_[b];
    shard_numel_ += g.shard_numel;
    padded = padded || g.padded_numel(dp_size_) != g.numel();
    const int64_t reduced = options_.reduce_scatter ? g.padded_numel(dp_size_) : g.numel();
    if (g.numel() > 0 && (narrow || reduced != g.numel())) staging_[b] = ctx.zeros({reduced}, options_.reduce_dtype);
  }
  in_place_ = options_.reduce_scatter && options_.allow_in_place && !narrow && !padded;
  if (options_.reduce_scatter && !in_place_) {
    shard_grads_ = ctx.zeros({shard_numel_}, buffer.grad_dtype());
    if (narrow) reduced_shard_ = ctx.zeros({shard_numel_}, options_.reduce_dtype);
  }
}

int64_t GradBuckets::reduced_offset(size_t b) const {
  const GradBucket& g = buckets_[b];
  return in_place_ ? g.block_begin(dp_rank_) : g.shard_offset;
}

GradBuckets::~GradBuckets() {
  // Pending handles wait in their destructors; nothing else to release.
}

void GradBuckets::launch(size_t b) {
  const GradBucket& g = buckets_[b];
  if (!any_launched_) {
    any_launched_ = true;
    first_launch_ = buffer_.context().stream().record();
  }
  if (g.numel() > 0) {
    Tensor grads = buffer_.flat_grads().slice_flat(g.begin, {g.numel()});
    // Mean over dp: every rank scales its contribution by 1/dp before the sum (as Megatron does).
    if (dp_size_ > 1) ops::scale(grads, 1.0f / static_cast<float>(dp_size_));
    Tensor in = grads;
    if (staging_[b].defined()) {
      Tensor head = staging_[b].slice_flat(0, {g.numel()});
      ops::cast(grads, head);  // rounds to bf16, or copies
      in = staging_[b];
    }
    if (!options_.reduce_scatter) {
      handles_[b] = dp_.all_reduce_async(in);
    } else {
      // In place: this rank's block of the bucket itself (the communicator's in-place form).
      const Tensor out = reduced_shard_.defined() ? reduced_shard_.slice_flat(g.shard_offset, {g.shard_numel}) : shard(b);
      handles_[b] = dp_.reduce_scatter_async(in, out);
    }
  }
  ++next_launch_;
}

void GradBuckets::progress() {
  for (int b = 0; b < next_launch_; ++b) {
    if (handles_[b].pending()) handles_[b].test();
  }
}

void GradBuckets::mark_ready(size_t param_index) {
  LATTICE_CHECK(param_index < param_ready_.size(), "GradBuckets::mark_ready: parameter {} of {}", param_index,
                param_ready_.size());
  LATTICE_CHECK(!param_ready_[param_index],
                "GradBuckets::mark_ready: parameter {} ('{}') marked ready twice in one step", param_index,
                buffer_.spec(param_index).name);
  param_ready_[param_index] = 1;
  ++ready_count_[param_bucket_[param_index]];
  if (!options_.overlap_grad_reduce) return;
  const auto begin = std::chrono::steady_clock::now();
  while (next_launch_ < static_cast<int>(buckets_.size())) {
    const GradBucket& g = buckets_[next_launch_];
    if (ready_count_[next_launch_] != static_cast<int>(g.last_param - g.first_param + 1)) break;
    launch(static_cast<size_t>(next_launch_));
  }
  progress();
  host_comm_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

GradReduceStats GradBuckets::last_stats() const {
  if (!last_launched_) return {};
  // On the CPU the compute thread does the launches' work itself: not hidden behind anything. On a
  // GPU it only queues it; the events time the stream.
  const double host = buffer_.context().device() == Device::kCpu ? last_host_comm_s_ : 0.0;
  const double comm_s = last_end_.seconds_since(last_first_launch_);
  return GradReduceStats{.comm_s = comm_s,
                         .wait_s = std::min(comm_s, last_end_.seconds_since(last_wait_start_) + host)};
}

void GradBuckets::finish() {
  // Timed by events on the compute stream (on a GPU: when the stream got there, not the host).
  const Stream& stream = buffer_.context().stream();
  const Event wait_start = stream.record();
  const bool launched_before = any_launched_;
  while (next_launch_ < static_cast<int>(buckets_.size())) launch(static_cast<size_t>(next_launch_));
  // The optimizer's work on the reduced gradients is ordered after the reductions: a stream wait.
  for (CommHandle& h : handles_) h.wait_on(stream);
  // A bf16 reduction: widen the results into the fp32 gradients (exact).
  if (reduced_shard_.defined()) {
    ops::cast(reduced_shard_, shard_grads_);
  } else if (options_.reduce_dtype != buffer_.grad_dtype()) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      if (!staging_[b].defined()) continue;
      Tensor grads = buffer_.flat_grads().slice_flat(buckets_[b].begin, {buckets_[b].numel()});
      ops::cast(staging_[b], grads);
    }
  }
  const Event end = stream.record();
  // Without overlap the first launch happens inside finish(): then all of it is exposed.
  last_launched_ = any_launched_;
  last_first_launch_ = first_launch_;
  last_wait_start_ = launched_before ? wait_start : first_launch_;
  last_end_ = end;
  last_host_comm_s_ = host_comm_s_;
  host_comm_s_ = 0.0;
  next_launch_ = 0;
  any_launched_ = false;
  std::fill(ready_count_.begin(), ready_count_.end(), 0);
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
}

}  // namespace lattice
