// CUDA softmax cross-entropy over rows of logits[N, V]; the typed Backend entries (kernels/typed_kernels.h:
// logits and dlogits f32 or bf16 each), same contracts as kernels/cpu/cross_entropy.h (one block per
// row, deterministic block reductions, everything on compute_stream()). The whole vocabulary's
// backward is the shard backward with first_col 0 and valid = cols.
#pragma once

#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice::cuda {

// targets must already be valid.
void cross_entropy_forward(DataIn logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                           int64_t vocab);
// The forward and the backward (dlogits may alias logits) in one kernel: lse and losses bitwise
// those of cross_entropy_forward, dlogits those of the backward with that lse.
void cross_entropy_forward_backward(DataIn logits, const int32_t* targets, float grad_scale, float* losses, float* lse,
                                    DataOut dlogits, int64_t rows, int64_t vocab);
// Vocab-parallel pieces: logits[rows, cols] are global columns [first_col, first_col + cols), the
// first `valid` real (the rest padding, ignored).
// row_max[r] = max over valid columns (-inf when valid == 0).
void cross_entropy_shard_max(DataIn logits, float* row_max, int64_t rows, int64_t cols, int64_t valid);
// sum_exp[r] = sum over valid columns of exp(x - row_max[r]); target_logit[r] = the target's logit
// when this shard owns it, else 0.
void cross_entropy_shard_sums(DataIn logits, const int32_t* targets, const float* row_max, float* sum_exp,
                              float* target_logit, int64_t rows, int64_t cols, int64_t first_col, int64_t valid);
// lse = row_max + log(sum_exp); losses = lse - target_logit (all f32).
void cross_entropy_shard_loss(const float* row_max, const float* sum_exp, const float* target_logit, float* losses,
                              float* lse, int64_t rows);
// dlogits = (softmax - onehot) * grad_scale on valid columns, 0 on padding; may alias logits.
void cross_entropy_shard_backward(DataIn logits, const int32_t* targets, const float* lse, float grad_scale,
                                  DataOut dlogits, int64_t rows, int64_t cols, int64_t first_col, int64_t valid);

}  // namespace lattice::cuda
