// GradBuckets: the data-parallel reduction of a ParamGradBuffer's flat fp32 gradients, bucket by
// bucket (reverse parameter order), launched as backward finishes each bucket when overlap is on;
// reduced in fp32, or in bf16 (half the bytes) and widened back to fp32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/param_grad_buffer.h"

namespace lattice {

// One bucket: parameters [first_param, last_param] (contiguous in the buffer's flat layout) covering
// flat elements [begin, end). Buckets are numbered in REVERSE parameter order: bucket 0 holds the
// last parameters, whose gradients backward produces first.
//
// Sharded layout (distributed optimizer): each bucket is padded to padded_numel = shard_numel × dp
// elements; dp rank r owns bucket elements [r × shard_numel, (r+1) × shard_numel) (the part past
// `end` is padding, always zero). A rank's local shard state (the optimizer's) is the concatenation
// of its slices of bucket 0, 1, ...; bucket b's slice starts at shard_offset. So shards are
// contiguous per bucket (Megatron's layout): each bucket's reduce_scatter and all_gather is one
// collective, in place in the flat buffers when no bucket needs padding (GradBuckets::in_place).
struct GradBucket {
  size_t first_param = 0;
  size_t last_param = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t shard_numel = 0;
  int64_t shard_offset = 0;
  int64_t numel() const { return end - begin; }
  int64_t padded_numel(int dp) const { return shard_numel * dp; }
  // Where dp rank r's block of the bucket starts in the flat layout.
  int64_t block_begin(int rank) const { return begin + rank * shard_numel; }
};

// Splits the layout's parameters into buckets of at least bucket_size_mb MiB of fp32 (a bucket is
// closed as soon as it reaches the size, never splitting a parameter), walking parameters from the
// last to the first. bucket_size_mb <= 0: one bucket for everything. dp sets the shard geometry.
std::vector<GradBucket> make_grad_buckets(const ParamLayout& layout, double bucket_size_mb, int dp);

struct GradBucketOptions {
  double bucket_size_mb = 40.0;
  bool overlap_grad_reduce = true;
  // false: all_reduce (every rank gets the whole mean gradient, in the buffer's flat grads).
  // true: reduce_scatter (each rank gets only its shard's mean, at shard(b); the rest of the
  // buffer's flat grads is left unspecified) — for the distributed optimizer.
  bool reduce_scatter = false;
  // kF32, or kBF16: at launch each bucket's (1/dp-scaled) fp32 gradients are rounded into a bf16
  // staging buffer and reduced in bf16 (every combine rounds); finish() widens the result back into
  // the fp32 gradients (or the shards).
  DType reduce_dtype = DType::kF32;
  // reduce_scatter: reduce in place where the layout allows (GradBuckets::in_place). false: always
  // into a packed shard buffer (tests compare the two, bit for bit).
  bool allow_in_place = true;
};

// Times of the last finish(), from events on the compute stream: comm_s from the first launch of
// the step to the end of finish() (the time some gradient communication was outstanding), wait_s the
// part the stream spent waiting in finish(), plus, on the CPU, the time the compute thread itself
// spent launching and progressing the reductions during backward (the scale, the cast and the MPI
// calls: work for the communication, not compute it hides behind). hidden_fraction = 1 - wait_s /
// comm_s: the share of communication behind compute. Read from the events by last_stats(), which waits for them: call
// it after the step's read-back so that finish() adds no host synchronization.
struct GradReduceStats {
  double comm_s = 0.0;
  double wait_s = 0.0;
  double hidden_fraction() const { return comm_s > 0.0 ? std::max(0.0, 1.0 - wait_s / comm_s) : 0.0; }
};

class GradBuckets {
 public:
  // `buffer` and `dp` must outlive this object. Every dp rank must build it with the same layout
  // and options (buckets are collectives in bucket order).
  GradBuckets(ParamGradBuffer& buffer, Communicator& dp, const GradBucketOptions& options);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Backward has finished parameter i's gradient for this step (its last micro-batch). When this
  // completes a bucket and overlap is on, the bucket's reduction starts now — but buckets launch
  // strictly in bucket order (a complete bucket waits for all earlier ones), so every rank issues
  // the same collectives in the same order whatever order its backward marks parameters in.
  // Marking a parameter twice in one step is an error.
  void mark_ready(size_t param_index);

  // Launches whatever has not been launched (everything without overlap), waits for all buckets and
  // resets for the next step. After it: all_reduce mode — every rank's buffer.flat_grads() holds the
  // mean over dp; reduce_scatter mode — shard(b) holds this rank's shard of bucket b's mean.
  void finish();

  // Number of bucket reductions launched since the last finish() (tests, tracing).
  int launched() const { return next_launch_; }

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  size_t bucket_of_param(size_t param_index) const { return param_bucket_[param_index]; }
  const GradBucketOptions& options() const { return options_; }
  int dp_size() const { return dp_size_; }
  int dp_rank() const { return dp_rank_; }
  Communicator& comm() const { return dp_; }
  ParamGradBuffer& buffer() const { return buffer_; }

  // reduce_scatter mode. In place (f32 reduction and no bucket needing padding, Megatron's layout):
  // each bucket reduce-scatters within the flat gradients, and this rank's shard stays there, at
  // its block of the bucket — no second gradient buffer. Otherwise the shards are packed into a
  // buffer of their own at shard_offset (padding elements zero).
  bool in_place() const { return in_place_; }
  // Where the shards lie: flat_grads() in place, else the packed buffer; bucket b's at reduced_offset(b).
  const Tensor& reduced_grads() const { return in_place_ ? buffer_.flat_grads() : shard_grads_; }
  int64_t reduced_offset(size_t b) const;
  // This rank's shard of bucket b's mean gradient after finish(): shard_numel elements.
  Tensor shard(size_t b) const { return reduced_grads().slice_flat(reduced_offset(b), {buckets_[b].shard_numel}); }
  // The sum of the buckets' shard_numel: the size of this rank's shard state.
  int64_t shard_numel() const { return shard_numel_; }

  GradReduceStats last_stats() const;

 private:
  void launch(size_t b);
  void progress();

  ParamGradBuffer& buffer_;
  Communicator& dp_;
  GradBucketOptions options_;
  int dp_size_;
  int dp_rank_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> param_bucket_;
  std::vector<int> ready_count_;      // per bucket, parameters marked this step
  std::vector<char> param_ready_;     // per parameter
  std::vector<CommHandle> handles_;   // per bucket
  // Per bucket, what its reduction reads when that is not the gradients themselves: a copy in
  // reduce_dtype and/or, for reduce_scatter, padded to padded_numel (the padding stays zero).
  std::vector<Tensor> staging_;
  bool in_place_ = false;
  int64_t shard_numel_ = 0;
  Tensor shard_grads_;    // packed shards (reduce_scatter, not in place)
  Tensor reduced_shard_;  // bf16 reduce_scatter: the reduced shard, which finish() widens into shard_grads_
  int next_launch_ = 0;
  bool any_launched_ = false;
  Event first_launch_;  // on the compute stream, at the step's first launch
  // The last finish()'s intervals (none when it launched nothing): its start of waiting (or the
  // first launch, when finish() launched everything) and its end.
  // CPU: host seconds the compute thread spent in launches and progress outside finish() this step.
  double host_comm_s_ = 0.0;
  double last_host_comm_s_ = 0.0;
  bool last_launched_ = false;
  Event last_first_launch_, last_wait_start_, last_end_;
};

}  // namespace lattice
