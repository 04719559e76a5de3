// GradSync: turns this rank's accumulated gradients into the whole-model gradient the optimizer
// steps on, overlapped with backward. As backward finishes a parameter's gradient on its chunk's
// last micro-batch (the trainer's hook), the parameter is handed to the data-parallel buckets — or,
// first, summed over the tp group (tp_duplicated parameters under sequence parallelism: each tp
// rank saw only its share of the tokens) or over the embedding group (the tied word embeddings:
// the first stage's table and the last stage's head replica each hold part of the gradient), and
// handed over once that sum has completed.
#pragma once

#include <vector>

#include "parallel/communicator.h"
#include "parallel/grad_buckets.h"
#include "parallel/param_grad_buffer.h"
#include "parallel/trace.h"

namespace lattice {

class GradSync {
 public:
  // tp: this rank's tp group; its sums run for tp_duplicated parameters when sequence_parallel and
  // tp.size() > 1. embedding: the embedding group (nullptr on middle stages); its sum runs for
  // "embedding.word_embeddings.weight" when tied_embeddings and the group has two ranks.
  // buckets: the data-parallel reduction (nullptr without data parallelism). All must outlive this.
  GradSync(ParamGradBuffer& buffer, Communicator& tp, bool sequence_parallel, Communicator* embedding,
           bool tied_embeddings, GradBuckets* buckets, Tracer& tracer);

  // Backward has finished these parameters' gradients for the step. Starts their group sums (one
  // all-reduce per run of adjacent parameters: a norm's weight and bias, a row-parallel bias next
  // to a norm) or marks them ready for the buckets; also marks those whose sum has completed.
  void grads_done(const std::vector<size_t>& param_indices);
  // After the pipeline step: waits for the outstanding sums, marks them ready, finishes the buckets
  // (see GradBuckets::finish) and checks that backward reported every parameter exactly once.
  void finish();

  GradBuckets* buckets() const { return buckets_; }

 private:
  enum class Route { kDirect, kTpSum, kEmbeddingSum };
  // A sum in flight over parameters [first, last] (adjacent in the flat gradient buffer).
  struct Pending {
    CommHandle handle;
    size_t first, last;
  };
  void ready(size_t first, size_t last);
  void start_sum(Route route, size_t first, size_t last);
  void poll();

  ParamGradBuffer& buffer_;
  Communicator& tp_;
  Communicator* embedding_;
  GradBuckets* buckets_;
  Tracer& tracer_;
  std::vector<Route> route_;
  std::vector<char> reported_;
  size_t reported_count_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace lattice
