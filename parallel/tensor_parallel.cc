// Tensor-parallel region operations: collectives on the tp group that the layers' stream waits
// for, free at tp size 1.
#include "parallel/tensor_parallel.h"

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

namespace {

bool single(const TensorParallel& tp) { return tp.group == nullptr || tp.group->size() == 1; }

// A token split at tp size 1: the whole tensor is the one block.
void copy_block(const Tensor& from, const Tensor& to) {
  Tensor dst = to;
  ops::copy(from, dst);
}

void check_split(const char* op, const TensorParallel& tp, const Tensor& local, const Tensor& full) {
  LATTICE_CHECK(full.numel() == local.numel() * tp.size(), "{}: full {} must hold tp {} × local {}", op,
                full.describe(), tp.size(), local.describe());
}

}  // namespace

void copy_to_tp_region_backward(const TensorParallel& tp, const Tensor& grad) {
  copy_to_tp_region_backward_async(tp, grad).wait_on(tp.stream);
}

CommHandle copy_to_tp_region_backward_async(const TensorParallel& tp, const Tensor& grad) {
  if (single(tp)) return {};
  return tp.group->all_reduce_async(grad);
}

void reduce_from_tp_region_forward(const TensorParallel& tp, const Tensor& x) {
  if (single(tp)) return;
  tp.group->all_reduce_async(x).wait_on(tp.stream);
}

void gather_tokens_forward(const TensorParallel& tp, const Tensor& local, const Tensor& full) {
  check_split("gather_tokens_forward", tp, local, full);
  if (single(tp)) return copy_block(local, full);
  tp.group->all_gather_async(local, full).wait_on(tp.stream);
}

void gather_tokens_backward(const TensorParallel& tp, const Tensor& d_full, const Tensor& d_local) {
  gather_tokens_backward_async(tp, d_full, d_local).wait_on(tp.stream);
}

CommHandle gather_tokens_backward_async(const TensorParallel& tp, const Tensor& d_full, const Tensor& d_local) {
  check_split("gather_tokens_backward", tp, d_local, d_full);
  if (single(tp)) {
    copy_block(d_full, d_local);
    return {};
  }
  return tp.group->reduce_scatter_async(d_full, d_local);
}

void reduce_scatter_tokens_forward(const TensorParallel& tp, const Tensor& partial, const Tensor& local) {
  check_split("reduce_scatter_tokens_forward", tp, local, partial);
  if (single(tp)) return copy_block(partial, local);
  tp.group->reduce_scatter_async(partial, local).wait_on(tp.stream);
}

void reduce_scatter_tokens_backward(const TensorParallel& tp, const Tensor& d_local, const Tensor& d_full) {
  check_split("reduce_scatter_tokens_backward", tp, d_local, d_full);
  if (single(tp)) return copy_block(d_local, d_full);
  tp.group->all_gather_async(d_local, d_full).wait_on(tp.stream);
}

}  // namespace lattice
