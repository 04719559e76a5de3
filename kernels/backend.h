// Backend: the table of one device's kernels that kernels/ops.cc dispatches to (one per backend:
// kernels/cpu/cpu_backend.cc now, kernels/cuda later), and the registry that maps a device to it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernels/adamw_runs.h"
#include "kernels/attention_shape.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "kernels/typed_kernels.h"

namespace lattice {

// Kernels take raw device pointers and sizes that ops.cc has already checked (dtypes, shapes,
// devices), so an entry only computes. Entries enqueue on the backend's compute stream, the one its
// DeviceContext owns (CPU: run inline). Argument meanings are those of the ops.h call of the same
// name; kernels/cpu/*.h spell out the raw forms.
struct Backend {
  Device device;

  // ---- memory (bytes on this device; host pointers are pageable host memory) ----
  std::shared_ptr<Storage> (*allocate)(size_t bytes);
  void (*zero)(void* data, int64_t bytes);
  void (*copy)(const void* src, void* dst, int64_t bytes);  // device to device, may overlap
  // Return once the destination holds the data (the GPU stages through pinned memory).
  void (*copy_to_host)(const void* src, void* host_dst, int64_t bytes);
  void (*copy_from_host)(const void* host_src, void* dst, int64_t bytes);
  // Page-locked host memory (the storage of a host tensor, Device::kCpu) that copy_from_pinned
  // reads by DMA without staging (CPU: ordinary host memory).
  std::shared_ptr<Storage> (*allocate_pinned)(size_t bytes);
  // Enqueues a copy from pinned host memory on the compute stream and returns at once: the source
  // must stay unchanged until an event recorded after the call has completed (CPU: a plain copy).
  void (*copy_from_pinned)(const void* pinned_src, void* dst, int64_t bytes);
  // Optional (null: copy_to_host). Enqueues a device -> pinned host copy on the device's copy
  // stream, a second stream beside the compute stream, ordered after the compute stream's current
  // point; returns an event at the copy's end without the host waiting, so that a checkpoint
  // snapshot overlaps the next step's compute.
  std::shared_ptr<void> (*copy_to_pinned_async)(const void* src, void* pinned_dst, int64_t bytes);

  // ---- the compute stream and its events (null on the CPU, where work runs inline) ----
  void (*synchronize)();                    // the host waits for the compute stream
  std::shared_ptr<void> (*record_event)();  // an event at the compute stream's current point
  bool (*event_query)(void* event);
  void (*event_synchronize)(void* event);
  // Optional (null: one stream, nothing to order). The compute stream waits, on the device, for an
  // event of another of the device's streams (the copy stream's).
  void (*compute_wait)(void* event);
  double (*event_seconds)(void* start, void* end);  // device time between two events
  // Makes GPU local_rank mod visible the process's device; returns a line for the log. Exit 2
  // (InputError) when no device is visible.
  std::string (*select_device)(int local_rank, int local_size);
  std::string (*device_model)();  // the selected device's model name ("NVIDIA H200"): bench's datasheet peak
  // Optional: the selected device's compute capability as major * 10 + minor (90: Hopper).
  int (*device_compute_capability)();
  // The selected device's UUID: ranks that report the same one share a GPU (trainer/gpu_sharing.h;
  // CUDA_VISIBLE_DEVICES may show each rank a different GPU as device 0). And its memory in all, for
  // the memory check before a run allocates (trainer/memory_check.h).
  std::array<uint8_t, 16> (*device_uuid)();
  size_t (*device_memory_bytes)();
  size_t (*peak_memory_bytes)();  // the most device memory in use at once so far
  // Optional (GPUs): the device's memory in use now beyond the allocator's (the CUDA context, the
  // libraries' handles, NCCL's buffers, other processes on the device), which the plan does not count.
  size_t (*memory_outside_pool_bytes)();
  void (*set_tf32)(bool enabled);  // f32 matmuls in TF32 from now on (training.tf32)
  // Optional: gemm_gelu and gemm_dgelu take problems from now on (training.gelu_fusion).
  void (*set_gelu_fusion)(bool enabled);
  // Optional: gemm_bias_grad takes problems from now on (training.bias_grad_fusion).
  void (*set_bias_grad_fusion)(bool enabled);
  // Optional: bf16 attention's backward deterministic (the default) or not (training.deterministic_attention).
  void (*set_deterministic_attention)(bool deterministic);
  // Optional: GEMM algorithms chosen by timing, the choices kept in DIR/rank-NNNNN.json (empty: off;
  // training.gemm_autotune_dir). InputError when that file is not this machine's.
  void (*set_gemm_autotune)(const std::string& dir, int rank);
  // Optional: opens (cudaProfilerStart) or closes (every stream drained, then cudaProfilerStop) the
  // capture range of a profiler started with nsys --capture-range=cudaProfilerApi.
  void (*set_profiler_capture)(bool on);

  // ---- elementwise and reductions ----
  void (*fill)(float* x, int64_t n, float value);
  void (*scale)(float* x, int64_t n, float alpha);
  void (*axpy)(float alpha, const float* x, float* y, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  double (*sum_squares)(const float* x, int64_t n);  // returns a host value (synchronizes)
  // *out (one device double) = the sum / the sum of squares of x; no host value, no sync.
  void (*sum_to)(const float* x, int64_t n, double* out);
  void (*sum_squares_to)(const float* x, int64_t n, double* out);
  void (*add_bias)(float* y, const float* bias, int64_t rows, int64_t cols);
  void (*bias_backward)(const float* dy, float* dbias, int64_t rows, int64_t cols);
  void (*f32_to_bf16)(const float* src, uint16_t* dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int64_t n);

  // ---- matrix multiply: row-major c[M, N] = alpha op(a) op(b) + beta c, with row strides ----
  void (*sgemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  // The same with a and b bf16, accumulation in f32, and c bf16 or f32 (c_is_bf16); k > 0. bf16 x
  // bf16 into an f32 c with beta = 1 is the weight gradient accumulating into main_grad (Megatron's
  // gradient_accumulation_fusion). Optional: where it is null, ops::matmul widens bf16 operands
  // into f32 scratch for sgemm (kernels/f32_staging.h).
  void (*gemm_bf16)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16, int64_t ldc);
  // Optional: c = op(a) op(b) + bias (bias[N] added to every row; alpha 1, beta 0) in one pass, the
  // bias added in the GEMM's epilogue. a and b both f32 or both bf16 (ab_bf16), c and bias of one
  // dtype (c_bf16); k > 0. Returns false, having done nothing, for what it does not take (ops then
  // runs matmul and add_bias).
  bool (*gemm_bias)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                    const void* b, int64_t ldb, bool ab_bf16, const void* bias, void* c, bool c_bf16, int64_t ldc);
  // Optional: `batch` products of one shape in one call, the i-th reading a + i·stride_a, b + i·stride_b
  // (and bias + i·stride_bias) and writing c + i·stride_c, strides in elements (0: one operand
  // shared by every product): c = alpha op(a) op(b) + beta c, or with a bias (not null; alpha 1,
  // beta 0) c = op(a) op(b) + bias[N] on every row. a and b both f32 (c f32) or both bf16 (c bf16 or
  // f32); the bias of c's dtype; k > 0. Returns false, having done nothing, for what it does not take
  // (ops::matmul_group then runs the products one by one).
  bool (*gemm_batched)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                       int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, bool ab_bf16,
                       const void* bias, int64_t stride_bias, float beta, void* c, bool c_bf16, int64_t ldc,
                       int64_t stride_c, int64_t batch);
  // Optional: c = op(a) op(b) (+ bias[N] on every row when bias is not null) + residual[M, N] in
  // one pass (residual and bias of c's dtype, residual with c's row stride and not overlapping it;
  // a and b both f32 or both bf16; k > 0). Returns false, having done nothing, for what it does not
  // take (ops::matmul_residual then runs matmul_bias and add).
  bool (*gemm_residual)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                        const void* b, int64_t ldb, bool ab_bf16, const void* bias, const void* residual, void* c,
                        bool c_bf16, int64_t ldc);
  // Optional: a linear layer's parameter gradients in one GEMM, c[M, N] += op(a)^T b with a [K, M]
  // and b [K, N] (dy and x; beta 1) and bias_grad[M] += the sums over K of a's columns (dy's column
  // sums), the bias gradient reduced in the GEMM's epilogue. a and b both f32 or both bf16
  // (ab_bf16); c and bias_grad f32; k > 0. Returns false, having done nothing, for what it does not
  // take (ops::linear_weight_grad then runs matmul and bias_backward).
  bool (*gemm_bias_grad)(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                         bool ab_bf16, float* c, float* bias_grad);
  // Optional, the same kind of entries for a GELU MLP (pre, out, dx and bias of c's dtype; alpha 1,
  // beta 0; false, having done nothing, for what they do not take):
  //   gemm_gelu: pre = op(a) op(b) (+ bias[N] when bias is not null), out = gelu(pre), in one GEMM;
  //   gemm_dgelu: dx = gelu'(pre) * (op(a) op(b)) elementwise, in one GEMM.
  bool (*gemm_gelu)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                    const void* b, int64_t ldb, bool ab_bf16, const void* bias, void* pre, void* out, bool c_bf16,
                    int64_t ldc);
  bool (*gemm_dgelu)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                     const void* b, int64_t ldb, bool ab_bf16, const void* pre, void* dx, bool c_bf16, int64_t ldc);

  // ---- embeddings ----
  // Throws lattice::Error naming `op`, the first id outside [0, vocab) and its position.
  void (*check_indices)(const char* op, const char* what, const int32_t* ids, int64_t n, int64_t vocab);
  void (*embedding_forward)(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden);
  void (*embedding_backward)(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t hidden);
  void (*add_position_embedding)(float* x, const float* table, int64_t batch, int64_t seq, int64_t hidden);
  void (*position_embedding_backward)(const float* dx, float* dtable, int64_t batch, int64_t seq, int64_t hidden);
  void (*embedding_forward_shard)(const int32_t* ids, const float* table, float* out, int64_t n, int64_t hidden,
                                  int64_t first_row, int64_t rows);
  void (*embedding_backward_shard)(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                                   int64_t hidden, int64_t first_row, int64_t rows);
  void (*add_position_embedding_tokens)(float* x, const float* table, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token);
  void (*position_embedding_backward_tokens)(const float* dx, float* dtable, int64_t n, int64_t hidden,
                                             int64_t seq, int64_t first_token);

  // ---- normalization (beta / dbeta may be null) ----
  void (*layernorm_forward)(const float* x, const float* gamma, const float* beta, float eps, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t hidden);
  void (*layernorm_backward)(const float* dy, const float* x, const float* gamma, const float* mean,
                             const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                             int64_t hidden);
  void (*rmsnorm_forward)(const float* x, const float* gamma, float eps, float* y, float* rstd, int64_t rows,
                          int64_t hidden);
  void (*rmsnorm_backward)(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                           float* dgamma, int64_t rows, int64_t hidden);

  // ---- activations ----
  void (*gelu_forward)(const float* x, float* y, int64_t n);
  void (*gelu_backward)(const float* dy, const float* x, float* dx, int64_t n);
  void (*swiglu_forward)(const float* gate, const float* up, float* y, int64_t n);
  void (*swiglu_backward)(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                          int64_t n);

  // ---- rotary position embedding (inverse: the backward rotation) ----
  void (*rope)(float* x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse);

  // ---- causal self-attention ----
  void (*attention_forward)(const float* q, const float* k, const float* v, float* out, float* lse,
                            const AttentionShape& s);
  void (*attention_backward)(const float* dout, const float* q, const float* k, const float* v,
                             const float* out, const float* lse, float* dq, float* dk, float* dv,
                             const AttentionShape& s);
  // The same with bf16 q, k, v, out and their gradients (lse f32): a device's own half-precision
  // attention (cuDNN's SDPA on CUDA). Optional: null, or false returned for a shape it does not
  // take, and ops widens the operands for the f32 entries above (kernels/f32_staging.h).
  bool (*attention_forward_bf16)(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                                 const AttentionShape& s);
  bool (*attention_backward_bf16)(const uint16_t* dout, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  const uint16_t* out, const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                  const AttentionShape& s);
  // Optional, beside the two above: the device memory bf16 attention of this shape takes beyond its
  // operands, which a device's library sizes only on the device (cuDNN's SDPA workspace, as it
  // builds the graphs), for the memory plan; and that memory allocated now and kept, so that a run's
  // steps allocate nothing.
  int64_t (*attention_bf16_workspace_bytes)(const AttentionShape& s);
  void (*reserve_attention_bf16_workspace)(const AttentionShape& s);

  // ---- loss ----
  void (*cross_entropy_forward)(const float* logits, const int32_t* targets, float* losses, float* lse,
                                int64_t rows, int64_t vocab);
  void (*cross_entropy_backward)(const float* logits, const int32_t* targets, const float* lse, float grad_scale,
                                 float* dlogits, int64_t rows, int64_t vocab);
  void (*cross_entropy_shard_max)(const float* logits, float* row_max, int64_t rows, int64_t cols, int64_t valid);
  void (*cross_entropy_shard_sums)(const float* logits, const int32_t* targets, const float* row_max,
                                   float* sum_exp, float* target_logit, int64_t rows, int64_t cols,
                                   int64_t first_col, int64_t valid);
  void (*cross_entropy_shard_loss)(const float* row_max, const float* sum_exp, const float* target_logit,
                                   float* losses, float* lse, int64_t rows);
  void (*cross_entropy_shard_backward)(const float* logits, const int32_t* targets, const float* lse,
                                       float grad_scale, float* dlogits, int64_t rows, int64_t cols,
                                       int64_t first_col, int64_t valid);

  // ---- initialization and optimizer ----
  void (*fill_normal)(float* x, const std::vector<int64_t>& box_shape, const std::vector<int64_t>& global_shape,
                      const std::vector<int64_t>& box_offset, uint64_t seed, uint64_t stream, float std);
  void (*adamw_update)(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                       const ops::AdamWParams& p);
  // Optional (null: adamw_update on each run, then a cast into `copy`): adamw_update over `count`
  // runs of the flat buffers (each numel > 0, inside them) in a few launches instead of one a run,
  // p.weight_decay where run.decay and none elsewhere, with the same bits. When copy.data is not
  // null, each updated element is also stored at its index of copy, in copy's dtype: the bf16
  // parameters' write-back without a second pass over the fp32 ones.
  void (*adamw_update_runs)(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, const AdamWRun* runs,
                            size_t count, const ops::AdamWParams& p, DataOut copy, bool values_at_grads);

  // ---- bf16 without staging (optional) ----
  // A device's kernels that load and store bf16 operands themselves (kernels/typed_kernels.h). Where
  // set, ops.cc calls them for the ops they cover whatever the dtypes, and the f32 entries of those
  // ops may be null; where null (the CPU), bf16 operands are staged through f32 for the entries above.
  const TypedKernels* typed = nullptr;
};

// The backend of `device`; a device whose backend is not in this binary is a lattice::Error naming
// `op` (the operation that asked) and the device.
const Backend& backend_for(const char* op, Device device);
// The backend of the device that every defined tensor in `tensors` is on (CPU when none is
// defined; null entries are skipped); tensors on two devices are an error naming `op` and both.
const Backend& backend_for(const char* op, std::initializer_list<const Tensor*> tensors);

// Whether this binary has a backend for `device` (the CUDA one comes with --config=cuda).
bool has_backend(Device device);

// Makes `backend` (null: none) the one of `device` and returns the previous one. The CUDA build
// registers its table at startup; tests swap in tables to check the harness.
const Backend* set_backend(Device device, const Backend* backend);

}  // namespace lattice
