// CPU matrix multiply: a thin wrapper over OpenBLAS cblas_sgemm (row-major).
#pragma once

#include <cstdint>

namespace lattice::cpu {

// c[M, N] = alpha * op(a) @ op(b) + beta * c; op(a) is [M, K], op(b) is [K, N]; lda/ldb/ldc are
// the row strides of a, b, c as stored.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace lattice::cpu
