// TypedKernels: the data-operand kernels of a device that loads and stores each operand in its own
// dtype (f32 or bf16) and computes in f32 in between, in one pass. They give the bits that
// F32Staging's widen, f32 kernel, round back give (bf16 -> f32 is exact, the arithmetic is the f32
// kernel's, the store rounds to nearest even once), without the staging's extra reads and writes of
// f32 scratch: on a GPU those are most of an elementwise op's memory traffic. A Backend that has
// them (Backend::typed; CUDA's) gets every op below through them; one without (the CPU) stages.
#pragma once

#include <cstdint>

namespace lattice {

// A data operand: its elements, bf16 or else f32. Null data: an absent optional operand (beta,
// dbeta). Plain values, so kernels take them as launch arguments.
struct DataIn {
  const void* data;
  bool bf16;
};
struct DataOut {
  void* data;
  bool bf16;
};

// The contracts are those of the Backend entries of the same names (kernels/backend.h), with these
// forms standing for the plain ones: an embedding table that is the whole vocabulary is the shard
// (first_row 0, rows = V), the [B, T, H] position embedding is the token form (first_token 0,
// seq = T), and cross_entropy_backward is the shard backward over all columns (first_col 0,
// valid = V). Statistics (mean, rstd, lse, row_max, sums) stay f32.
struct TypedKernels {
  // ---- elementwise ----
  void (*fill)(DataOut x, int64_t n, float value);
  void (*scale)(DataOut x, int64_t n, float alpha);
  void (*axpy)(float alpha, DataIn x, DataOut y, int64_t n);
  void (*add)(DataIn a, DataIn b, DataOut out, int64_t n);  // out may alias a or b
  void (*add_bias)(DataOut y, DataIn bias, int64_t rows, int64_t cols);
  void (*bias_backward)(DataIn dy, DataOut dbias, int64_t rows, int64_t cols);
  // Optional (null: ops runs bias_backward per product): `count` products of one shape at once.
  void (*bias_backward_group)(const DataIn* dys, const DataOut* dbiases, int count, int64_t rows, int64_t cols);

  // ---- embeddings ----
  void (*embedding_forward_shard)(const int32_t* ids, DataIn table, DataOut out, int64_t n, int64_t hidden,
                                  int64_t first_row, int64_t rows);
  // dtable is f32: the token-order walk may leave a row and come back to it, and a bf16 store in
  // between would round twice where staging rounds once (ops stages a bf16 dtable).
  void (*embedding_backward_shard)(const int32_t* ids, DataIn dout, float* dtable, int64_t n, int64_t hidden,
                                   int64_t first_row, int64_t rows);
  void (*add_position_embedding_tokens)(DataOut x, DataIn table, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token);
  void (*position_embedding_backward_tokens)(DataIn dx, DataOut dtable, int64_t n, int64_t hidden, int64_t seq,
                                             int64_t first_token);

  // ---- normalization (beta / dbeta: null data when absent) ----
  void (*layernorm_forward)(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean, float* rstd,
                            int64_t rows, int64_t hidden);
  // residual (null data when absent): dx then += residual, with ops::add's rounding of a stored dx.
  void (*layernorm_backward)(DataIn dy, DataIn x, DataIn gamma, const float* mean, const float* rstd, DataIn residual,
                             DataOut dx, DataOut dgamma, DataOut dbeta, int64_t rows, int64_t hidden);
  void (*rmsnorm_forward)(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows, int64_t hidden);
  void (*rmsnorm_backward)(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataIn residual, DataOut dx,
                           DataOut dgamma, int64_t rows, int64_t hidden);

  // ---- activations ----
  void (*gelu_forward)(DataIn x, DataOut y, int64_t n);
  void (*gelu_backward)(DataIn dy, DataIn x, DataOut dx, int64_t n);
  void (*swiglu_forward)(DataIn gate, DataIn up, DataOut y, int64_t n);
  void (*swiglu_backward)(DataIn dy, DataIn gate, DataIn up, DataOut dgate, DataOut dup, int64_t n);

  // ---- rotary position embedding ----
  void (*rope)(DataOut x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse);

  // ---- loss ----
  void (*cross_entropy_forward)(DataIn logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                                int64_t vocab);
  void (*cross_entropy_shard_max)(DataIn logits, float* row_max, int64_t rows, int64_t cols, int64_t valid);
  void (*cross_entropy_shard_sums)(DataIn logits, const int32_t* targets, const float* row_max, float* sum_exp,
                                   float* target_logit, int64_t rows, int64_t cols, int64_t first_col,
                                   int64_t valid);
  void (*cross_entropy_shard_backward)(DataIn logits, const int32_t* targets, const float* lse, float grad_scale,
                                       DataOut dlogits, int64_t rows, int64_t cols, int64_t first_col,
                                       int64_t valid);
  // Optional (null: ops runs the forward, then the backward): both in one pass over the logits,
  // with the bits of the two (training's fused classifier).
  void (*cross_entropy_forward_backward)(DataIn logits, const int32_t* targets, float grad_scale, float* losses,
                                         float* lse, DataOut dlogits, int64_t rows, int64_t vocab) = nullptr;
};

}  // namespace lattice
