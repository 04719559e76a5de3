// The tensor-parallel group as the model's layers see it, and Megatron's conjugate region
// operations on it. tp size 1 (group nullptr) makes every one of them free (no copy, no call),
// so one code path serves every layout.
//
// Sequence parallelism (SP) splits the FLATTENED token dimension [B·T] of the residual stream
// into tp contiguous blocks: rank r holds tokens [r·B·T/tp, (r+1)·B·T/tp). Activations are [B, T, H]
// batch-major, so this is the contiguous split; norms, residual adds and dropout act per token, so
// any token split is exact — this is Megatron-LM's sequence parallelism with the batch folded
// into the sequence. Outside the tensor-parallel regions (norms, residual stream, what flows
// between layers and pipeline chunks) tensors are [B·T/tp, H]; inside (attention, MLP) [B·T, ·].
#pragma once

#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/communicator.h"

namespace lattice {

// The region operations only order the layers' work after their collectives: they (and the
// layers, for the async forms) wait with handle.wait_on(stream), not on the host.
struct TensorParallel {
  Communicator* group = nullptr;  // nullptr: tp size 1
  bool sequence_parallel = false;
  Stream stream = Stream();  // where the layers' work is enqueued

  int size() const { return group != nullptr ? group->size() : 1; }
  int rank() const { return group != nullptr ? group->rank() : 0; }
};

// ---- copy-to-TP-region: the input of column-parallel layers (no SP) ----
// Forward: identity (every rank already holds the whole input).
inline void copy_to_tp_region_forward(const TensorParallel&, const Tensor&) {}
// Backward: each rank's input gradient is a partial sum over its columns: all-reduce in place.
void copy_to_tp_region_backward(const TensorParallel& tp, const Tensor& grad);
CommHandle copy_to_tp_region_backward_async(const TensorParallel& tp, const Tensor& grad);

// ---- reduce-from-TP-region: the output of row-parallel layers (no SP) ----
// Forward: partial sums over the ranks' input columns: all-reduce in place.
void reduce_from_tp_region_forward(const TensorParallel& tp, const Tensor& x);
// Backward: identity (every rank needs the whole output gradient).
inline void reduce_from_tp_region_backward(const TensorParallel&, const Tensor&) {}

// ---- gather-tokens (SP): entering a tensor-parallel region ----
// Forward: all-gather local [N/tp, H] -> full [N, H] (token block r from rank r).
void gather_tokens_forward(const TensorParallel& tp, const Tensor& local, const Tensor& full);
// Backward: full [N, H] partial gradients -> local [N/tp, H]: reduce-scatter over token blocks.
void gather_tokens_backward(const TensorParallel& tp, const Tensor& d_full, const Tensor& d_local);
CommHandle gather_tokens_backward_async(const TensorParallel& tp, const Tensor& d_full, const Tensor& d_local);

// ---- reduce-scatter-tokens (SP): leaving a tensor-parallel region ----
// Forward: full [N, H] partial sums -> local [N/tp, H] (sum over ranks, token block r to rank r).
void reduce_scatter_tokens_forward(const TensorParallel& tp, const Tensor& partial, const Tensor& local);
// Backward: all-gather local [N/tp, H] gradients -> full [N, H].
void reduce_scatter_tokens_backward(const TensorParallel& tp, const Tensor& d_local, const Tensor& d_full);

}  // namespace lattice
