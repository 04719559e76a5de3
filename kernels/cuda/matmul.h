// Matrix multiply on the GPU through cuBLASLt (the Backend's sgemm and gemm_bf16 entries).
#pragma once

#include <cstdint>

#include "kernels/cuda_workspace.h"

namespace lattice::cuda {

// Row-major c[M, N] = alpha op(a) op(b) + beta c with row strides lda/ldb/ldc, as the CPU sgemm.
// f32 in, f32 out, f32 accumulation (CUBLAS_COMPUTE_32F: exact f32, no TF32 unless set_tf32).
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with a and b bf16 and c bf16 or f32 (c_is_bf16): products accumulated in f32
// (CUBLAS_COMPUTE_32F; set_tf32 does not apply), a bf16 c rounded from the f32 result. k > 0.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16, int64_t ldc);

// What the bias epilogue takes (gemm_bias, gemm_residual): a non-empty product and a bias that is
// null or 16-byte aligned (the epilogue reads it with vector loads; a bias slice of the flat
// parameter buffer may not be).
inline bool bias_epilogue_fits(int64_t m, int64_t n, int64_t k, const void* bias) {
  return m > 0 && n > 0 && k > 0 && reinterpret_cast<uintptr_t>(bias) % 16 == 0;
}

// c = op(a) op(b) + bias[N] on every row (alpha 1, beta 0) through cuBLASLt's bias epilogue: a and
// b f32 or both bf16 (ab_bf16), c and bias of c's type. false (nothing run) for an empty product or
// a bias pointer that is not 16-byte aligned.
bool gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* c, bool c_bf16, int64_t ldc);

// `batch` products of one shape in one cuBLASLt call (Backend::gemm_batched): the i-th reads
// a + i·stride_a, b + i·stride_b and writes c + i·stride_c (element strides, 0 shares an operand);
// with a bias (not null: alpha 1, beta 0) the bias epilogue adds bias + i·stride_bias. a and b f32
// (c f32) or both bf16 (c bf16 or f32). false (nothing run) for an empty product, an f32 a with a
// bf16 c, a bias or bias stride not 16-byte aligned, or a problem the heuristic has no algorithm for.
// The rules of that list but the heuristic:
inline bool batched_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch, bool ab_bf16, bool c_bf16,
                              const void* bias, int64_t stride_bias) {
  const int64_t bias_bytes = c_bf16 ? 2 : 4;  // the bias is of c's type
  return bias_epilogue_fits(m, n, k, bias) && batch >= 1 && (ab_bf16 || !c_bf16) &&
         (bias == nullptr || stride_bias * bias_bytes % 16 == 0);
}
bool gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                  int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, bool ab_bf16, const void* bias,
                  int64_t stride_bias, float beta, void* c, bool c_bf16, int64_t ldc, int64_t stride_c,
                  int64_t batch);

// c = op(a) op(b) (+ bias[N] on every row when bias is not null) + residual through cuBLASLt with the
// residual as C (beta 1) and c as D, the bias in the epilogue: a and b f32 or both bf16 (ab_bf16);
// residual, c and bias of c's type, residual with c's row stride. false (nothing run) for an empty
// product or a bias pointer that is not 16-byte aligned.
bool gemm_residual(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, bool ab_bf16, const void* bias, const void* residual, void* c,
                   bool c_bf16, int64_t ldc);

// training.gelu_fusion, the GELU MLP's two GEMMs with cuBLASLt's GELU epilogues (a and b f32 or both
// bf16; pre, out, dx and the bias of c's type; alpha 1, beta 0). false (nothing run) while fusion is
// off, for an empty product, a row stride ldc != n, n not a multiple of 8, a bias or pre pointer
// not 16-byte aligned, or a problem the heuristic has no algorithm for: the caller then runs the
// unfused ops. The epilogue applies cuBLASLt's GELU to the f32 result, not kernels' formula to a
// rounded pre (tests/cuda/cuda_ops_test.cc measures the difference).
// The shape and pointer rules of that list (all but the switch and the heuristic):
inline bool gelu_epilogue_fits(int64_t m, int64_t n, int64_t k, int64_t ldc, const void* bias, const void* pre) {
  return bias_epilogue_fits(m, n, k, bias) && ldc == n && n % 8 == 0 && reinterpret_cast<uintptr_t>(pre) % 16 == 0;
}
//   gemm_gelu: pre = op(a) op(b) (+ bias[N] on every row when bias is not null), out = GELU(pre).
bool gemm_gelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* pre, void* out, bool c_bf16, int64_t ldc);
//   gemm_dgelu: dx = GELU'(pre) ⊙ op(a) op(b).
bool gemm_dgelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
                int64_t ldb, bool ab_bf16, const void* pre, void* dx, bool c_bf16, int64_t ldc);

// training.bias_grad_fusion, a linear layer's parameter gradients in one GEMM: c[M, N] += a^T b
// (a [K, M], b [K, N]: dy and x; row strides lda, ldb, ldc = N) and bias_grad[M] += the column
// sums of a, through cuBLASLt's BGRADB epilogue into a scratch vector then added (a and b f32 or
// both bf16; c and bias_grad f32). false (nothing run) while fusion is off, for an empty product, M
// beyond the scratch vector, or a problem the heuristic has no algorithm for: the caller then runs
// the GEMM and the bias gradient separately. The sums are in the GEMM algorithm's order.
inline bool bias_grad_epilogue_fits(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && m * int64_t{sizeof(float)} <= kBiasGradScratchBytes;
}
bool gemm_bias_grad(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                    bool ab_bf16, float* c, float* bias_grad);

// `batch` independent products of the same shape: the i-th reads a + i·stride_a and b + i·stride_b
// and writes c + i·stride_c (strides in elements). k > 0.
void sgemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                           int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                           float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// training.tf32: later matmuls use the tensor cores in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32).
void set_tf32(bool enabled);
// training.gelu_fusion: gemm_gelu and gemm_dgelu run from now on (off: they decline).
void set_gelu_fusion(bool enabled);
// training.bias_grad_fusion: gemm_bias_grad runs from now on (off: it declines).
void set_bias_grad_fusion(bool enabled);

}  // namespace lattice::cuda
