// Summing the tp-duplicated gradients over the tp group under sequence parallelism.
#include "model/sequence_parallel_grads.h"

#include "kernels/ops.h"

namespace lattice {

SequenceParallelGrads::SequenceParallelGrads(ParameterStore& params, TensorParallel tp) : params_(params), tp_(tp) {
  if (!tp.sequence_parallel || tp.size() == 1) return;
  int64_t offset = 0, total = 0;
  for (const ParamSpec& s : params.specs()) {
    const int64_t n = shape_numel(s.shape);
    if (s.tp_duplicated && n > 0) {
      if (!runs_.empty() && runs_.back().begin + runs_.back().count == offset) {
        runs_.back().count += n;
      } else {
        runs_.push_back({offset, n});
      }
      total += n;
    }
    offset += n;
  }
  if (runs_.size() > 1) packed_ = Tensor::empty({total});
}

void SequenceParallelGrads::sync() {
  if (runs_.empty()) return;
  Tensor& flat = params_.flat_grads();
  if (runs_.size() == 1) {  // already contiguous: reduce in place
    tp_.group->all_reduce(flat.slice_flat(runs_[0].begin, {runs_[0].count}));
    return;
  }
  int64_t at = 0;
  for (const Run& r : runs_) {
    Tensor dst = packed_.slice_flat(at, {r.count});
    ops::copy(flat.slice_flat(r.begin, {r.count}), dst);
    at += r.count;
  }
  tp_.group->all_reduce(packed_);
  at = 0;
  for (const Run& r : runs_) {
    Tensor dst = flat.slice_flat(r.begin, {r.count});
    ops::copy(packed_.slice_flat(at, {r.count}), dst);
    at += r.count;
  }
}

void sync_sequence_parallel_grads(ParameterStore& params, TensorParallel tp) { SequenceParallelGrads(params, tp).sync(); }

}  // namespace lattice
