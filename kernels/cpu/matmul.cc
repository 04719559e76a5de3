// CPU matrix multiply through OpenBLAS.
#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <climits>

#include "kernels/error.h"

namespace lattice::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  LATTICE_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
                "sgemm: dimension exceeds 32-bit BLAS (m={}, n={}, k={})", m, n, k);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace lattice::cpu
