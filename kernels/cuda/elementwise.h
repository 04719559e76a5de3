// CUDA elementwise kernels, byte zero/copy, the sums, the bias pair, f32 <-> bf16 casts and the
// fused AdamW step: the raw Backend-table forms (kernels/backend.h; DataIn / DataOut operands are
// the typed ones of kernels/typed_kernels.h, f32 or bf16 each), twins of kernels/cpu/
// elementwise.h, cast.h and adamw.h. Every call enqueues on lattice::cuda::compute_stream();
// only sum_squares synchronizes (it returns a host value). Plain C++ so .cc files can include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/typed_kernels.h"

namespace lattice {
struct AdamWRun;  // kernels/adamw_runs.h
}  // namespace lattice

namespace lattice::ops {
struct AdamWParams;  // kernels/ops.h
}  // namespace lattice::ops

namespace lattice::cuda {

void zero(void* data, int64_t bytes);
// Device to device; the ranges may overlap (then staged through a temporary).
void copy(const void* src, void* dst, int64_t bytes);
void fill(DataOut x, int64_t n, float value);
void scale(DataOut x, int64_t n, float alpha);
// The f32 forms (the Backend's f32 entries, and sgemm's k = 0).
void fill_f32(float* x, int64_t n, float value);
void scale_f32(float* x, int64_t n, float alpha);
void axpy(float alpha, DataIn x, DataOut y, int64_t n);
void add(DataIn a, DataIn b, DataOut out, int64_t n);  // out may alias a or b
// Sum of x^2 in double, returned to the host (synchronizes); the same kernel as sum_squares_to.
double sum_squares(const float* x, int64_t n);
// *out (one device double) = the sum / the sum of squares of x; deterministic, no sync.
void sum_to(const float* x, int64_t n, double* out);
void sum_squares_to(const float* x, int64_t n, double* out);
// y[N, F] += bias[F].
void add_bias(DataOut y, DataIn bias, int64_t rows, int64_t cols);
// dbias[F] += column sums of dy[N, F]; deterministic (no atomics).
void bias_backward(DataIn dy, DataOut dbias, int64_t rows, int64_t cols);
// The same for `count` products of one shape, in one launch of each kernel (per four products).
void bias_backward_group(const DataIn* dys, const DataOut* dbiases, int count, int64_t rows, int64_t cols);
// Round to nearest even, NaN stays a quiet NaN, overflow gives Inf (kernels/bf16.h bits).
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
// One AdamW step over n elements (see ops::AdamWParams), the formula of kernels/cpu/adamw.cc.
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const ops::AdamWParams& p);
// adamw_update over every run (Backend::adamw_update_runs), 96 runs a launch, the updated values
// also stored into copy when copy.data is not null; param at the gradients' offsets when
// values_at_grads (ValuesAt::kGradients), else at the moments'.
void adamw_update_runs(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, const AdamWRun* runs,
                       size_t count, const ops::AdamWParams& p, DataOut copy, bool values_at_grads);

}  // namespace lattice::cuda
