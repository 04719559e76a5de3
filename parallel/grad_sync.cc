// Gradient synchronisation over tp, the embedding group and dp, driven by backward's hook.
#include "parallel/grad_sync.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/nvtx_range.h"

namespace lattice {

GradSync::GradSync(ParamGradBuffer& buffer, Communicator& tp, bool sequence_parallel, Communicator* embedding,
                   bool tied_embeddings, GradBuckets* buckets, Tracer& tracer)
    : buffer_(buffer), tp_(tp), embedding_(embedding), buckets_(buckets), tracer_(tracer) {
  const bool tp_sums = sequence_parallel && tp.size() > 1;
  const bool embedding_sums = tied_embeddings && embedding != nullptr && embedding->size() > 1;
  route_.assign(buffer.count(), Route::kDirect);
  for (size_t i = 0; i < buffer.count(); ++i) {
    const ParamSpec& s = buffer.spec(i);
    const bool tp_sum = tp_sums && s.tp_duplicated;
    const bool embedding_sum = embedding_sums && s.name == "embedding.word_embeddings.weight";
    LATTICE_CHECK(!(tp_sum && embedding_sum), "parameter '{}' needs both a tp and an embedding-group sum", s.name);
    if (tp_sum) route_[i] = Route::kTpSum;
    if (embedding_sum) route_[i] = Route::kEmbeddingSum;
  }
  reported_.assign(buffer.count(), 0);
  pending_.reserve(buffer.count());
}

void GradSync::ready(size_t first, size_t last) {
  if (buckets_ == nullptr) return;
  for (size_t p = first; p <= last; ++p) buckets_->mark_ready(p);
}

void GradSync::start_sum(Route route, size_t first, size_t last) {
  Communicator& group = route == Route::kTpSum ? tp_ : *embedding_;
  const int64_t begin = buffer_.offset(first);
  const Tensor grads = buffer_.flat_grads().slice_flat(begin, {buffer_.offset(last + 1) - begin});
  pending_.push_back({group.all_reduce_async(grads), first, last});
}

void GradSync::poll() {
  // Completed sums leave the list; the rest keep their order.
  auto done = std::remove_if(pending_.begin(), pending_.end(), [&](Pending& p) {
    if (!p.handle.test()) return false;
    ready(p.first, p.last);
    return true;
  });
  pending_.erase(done, pending_.end());
}

void GradSync::grads_done(const std::vector<size_t>& param_indices) {
  // A run of parameters with the same group sum, adjacent in the buffer: [run_first, run_last].
  Route run_route = Route::kDirect;
  size_t run_first = 0, run_last = 0;
  bool open = false;
  for (const size_t i : param_indices) {
    LATTICE_CHECK(i < buffer_.count() && !reported_[i], "backward reported parameter {} ('{}') twice in one step", i,
                  i < buffer_.count() ? buffer_.spec(i).name : "?");
    reported_[i] = 1;
    ++reported_count_;
    if (route_[i] == Route::kDirect) {
      ready(i, i);
      continue;
    }
    if (open && route_[i] == run_route && i == run_last + 1) {
      run_last = i;
      continue;
    }
    // Group members run the same backward, so they start these sums in the same order.
    if (open) start_sum(run_route, run_first, run_last);
    run_route = route_[i];
    run_first = run_last = i;
    open = true;
  }
  if (open) start_sum(run_route, run_first, run_last);
  poll();
}

void GradSync::finish() {
  if (!pending_.empty()) {
    const NvtxRange range("grad sum wait", NvtxKind::kCommunication);
    TraceScope s = tracer_.scope("grad sum wait", "communication");
    for (Pending& p : pending_) {
      p.handle.wait_on(buffer_.context().stream());  // the dp reduction and optimizer come after
      ready(p.first, p.last);
    }
    pending_.clear();
  }
  if (reported_count_ != buffer_.count()) {
    std::string missing;
    for (size_t i = 0; i < buffer_.count(); ++i)
      if (!reported_[i]) missing += (missing.empty() ? "" : ", ") + buffer_.spec(i).name;
    throw Error(fmt::format("backward did not report the gradients of {} (the grads-done hook must name every "
                            "parameter once per step)",
                            missing));
  }
  std::fill(reported_.begin(), reported_.end(), 0);
  reported_count_ = 0;
  if (buckets_ != nullptr) {
    const NvtxRange range("grad reduce wait", NvtxKind::kCommunication);
    TraceScope s = tracer_.scope("grad reduce wait", "communication");
    buckets_->finish();
  }
}

}  // namespace lattice

