// Gradient synchronisation over tp, the embedding group and dp, driven by backward's hook.
#include "trainer/grad_sync.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

GradSync::GradSync(ParameterStore& store, Communicator& tp, bool sequence_parallel, Communicator* embedding,
                   bool tied_embeddings, GradBuckets* buckets, Tracer& tracer)
    : store_(store), tp_(tp), embedding_(embedding), buckets_(buckets), tracer_(tracer) {
  const bool tp_sums = sequence_parallel && tp.size() > 1;
  const bool embedding_sums = tied_embeddings && embedding != nullptr && embedding->size() > 1;
  route_.assign(store.count(), Route::kDirect);
  for (size_t i = 0; i < store.count(); ++i) {
    const ParamSpec& s = store.spec(i);
    const bool tp_sum = tp_sums && s.tp_duplicated;
    const bool embedding_sum = embedding_sums && s.name == "embedding.word_embeddings.weight";
    LATTICE_CHECK(!(tp_sum && embedding_sum), "parameter '{}' needs both a tp and an embedding-group sum", s.name);
    if (tp_sum) route_[i] = Route::kTpSum;
    if (embedding_sum) route_[i] = Route::kEmbeddingSum;
  }
  reported_.assign(store.count(), 0);
  pending_.reserve(store.count());
}

void GradSync::ready(size_t param) {
  if (buckets_ != nullptr) buckets_->mark_ready(param);
}

void GradSync::poll() {
  // Completed sums leave the list; the rest keep their order.
  auto done = std::remove_if(pending_.begin(), pending_.end(), [&](Pending& p) {
    if (!p.handle.test()) return false;
    ready(p.param);
    return true;
  });
  pending_.erase(done, pending_.end());
}

void GradSync::grads_done(const std::vector<size_t>& param_indices) {
  for (const size_t i : param_indices) {
    LATTICE_CHECK(i < store_.count() && !reported_[i], "backward reported parameter {} ('{}') twice in one step", i,
                  i < store_.count() ? store_.spec(i).name : "?");
    reported_[i] = 1;
    ++reported_count_;
    switch (route_[i]) {
      case Route::kDirect: ready(i); break;
      // Group members run the same backward, so they start these sums in the same order.
      case Route::kTpSum: pending_.push_back({tp_.all_reduce_async(store_.grad(i)), i}); break;
      case Route::kEmbeddingSum: pending_.push_back({embedding_->all_reduce_async(store_.grad(i)), i}); break;
    }
  }
  poll();
}

void GradSync::finish() {
  if (!pending_.empty()) {
    TraceScope s = tracer_.scope("grad sum wait", "communication");
    for (Pending& p : pending_) {
      p.handle.wait();
      ready(p.param);
    }
    pending_.clear();
  }
  if (reported_count_ != store_.count()) {
    std::string missing;
    for (size_t i = 0; i < store_.count(); ++i)
      if (!reported_[i]) missing += (missing.empty() ? "" : ", ") + store_.spec(i).name;
    throw Error(fmt::format("backward did not report the gradients of {} (the grads-done hook must name every "
                            "parameter once per step)",
                            missing));
  }
  std::fill(reported_.begin(), reported_.end(), 0);
  reported_count_ = 0;
  if (buckets_ != nullptr) {
    TraceScope s = tracer_.scope("grad reduce wait", "communication");
    buckets_->finish();
  }
}

}  // namespace lattice

