// Sequence parallelism leaves the gradients of tp-duplicated parameters (norms, row-parallel
// biases, position embeddings) partial: each tp rank saw only its own tokens. Summing them over
// the tp group — after backward, before the data-parallel reduction — completes them, so every
// tp rank holds the same full gradient (as it holds the same value).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

// Holds the packing plan and buffer, built once: the tp-duplicated gradients are scattered over
// the flat gradient buffer, so they are packed into one buffer for ONE all-reduce (adjacent
// ones, e.g. a norm's weight and bias, are one run) and unpacked. Does nothing without SP.
class SequenceParallelGrads {
 public:
  SequenceParallelGrads(ParameterStore& params, TensorParallel tp);
  void sync();
  // Number of tp-duplicated elements summed by sync() (0: nothing to do).
  int64_t numel() const { return packed_.defined() ? packed_.numel() : 0; }

 private:
  struct Run {
    int64_t begin = 0;  // in the flat gradient buffer
    int64_t count = 0;
  };
  ParameterStore& params_;
  TensorParallel tp_;
  std::vector<Run> runs_;
  Tensor packed_;  // defined only when there are runs and more than one of them
};

// One-shot form (builds the plan each call; the trainer keeps a SequenceParallelGrads instead).
void sync_sequence_parallel_grads(ParameterStore& params, TensorParallel tp);

}  // namespace lattice
