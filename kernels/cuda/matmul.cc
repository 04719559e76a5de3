// cuBLASLt matmul with descriptors and the heuristic's algorithm cached per problem, and one 32 MiB
// workspace (Hopper's recommended size; ../shared/GPU.md §2).
#include "kernels/cuda/matmul.h"

#include <cublasLt.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/runtime.h"
#include "kernels/error.h"

namespace lattice::cuda {

namespace {

#define LATTICE_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                   \
    const cublasStatus_t lattice_cublas_st_ = (call);                                                    \
    if (lattice_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      ::lattice::cuda::fail(#call, cublasLtGetStatusString(lattice_cublas_st_), __FILE__, __LINE__);     \
    }                                                                                                    \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The largest power of two (up to 16) that divides the pointer: cuBLASLt picks kernels by it.
int alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 4 && v % a != 0) a /= 2;
  return a;
}

// What the descriptors and the chosen algorithm depend on (the last flag: TF32).
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, int, int, bool>;

std::atomic<bool> tf32_enabled{false};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex mutex;
  std::map<Key, Plan> plans;
};

Lt& lt() {
  static Lt* s = [] {
    auto* state = new Lt;  // never destroyed: outlives every static that may still run a matmul
    LATTICE_CUBLAS_CHECK(cublasLtCreate(&state->handle));
    state->workspace = allocate(kWorkspaceBytes);
    return state;
  }();
  return *s;
}

cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  LATTICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
  return l;
}

Plan make_plan(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, has_beta, align_a, align_b, align_c, tf32] = key;
  Plan p;
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&p.op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Column-major shapes as stored (before the op): A is m×k (k×m when transposed), B is k×n (n×k).
  p.a = ta ? layout(k, m, lda) : layout(m, k, lda);
  p.b = tb ? layout(n, k, ldb) : layout(k, n, ldb);
  p.c = layout(m, n, ldc);

  cublasLtMatmulPreference_t pref = nullptr;
  LATTICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t aa = align_a, ab = align_b, ac = align_c;
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof(aa)));
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof(ab)));
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof(ac)));
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof(ac)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  LATTICE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt().handle, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    throw Error(fmt::format("cuBLASLt has no f32 algorithm for m={} n={} k={} (trans {} {}, ld {} {} {}, alignment "
                            "{} {} {}; beta {})",
                            m, n, k, ta, tb, lda, ldb, ldc, align_a, align_b, align_c, has_beta ? "!= 0" : "0"));
  }
  p.algo = result.algo;
  return p;
}

}  // namespace

void set_tf32(bool enabled) { tf32_enabled.store(enabled, std::memory_order_relaxed); }

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // op(a) op(b) is empty, so c = beta c (cuBLASLt does not take k = 0). BLAS semantics: beta = 0
    // sets c to zero whatever it held.
    LATTICE_CHECK(ldc == n, "sgemm: k = 0 with a strided c (ldc {} != n {}) is not supported on cuda", ldc, n);
    if (beta == 0.0f) {
      fill(c, m * n, 0.0f);
    } else {
      scale(c, m * n, beta);
    }
    return;
  }
  // Row-major C[M,N] is column-major C^T[N,M] = op(B)^T op(A)^T, and a row-major operand read as
  // column-major is its transpose: so cuBLAS multiplies (b, a) with the same transpose flags.
  const Key key{trans_b,      trans_a,      n,           m, k, ldb, lda, ldc, beta != 0.0f, alignment(b),
                alignment(a), alignment(c), tf32_enabled.load(std::memory_order_relaxed)};
  Lt& state = lt();
  const Plan* plan;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    auto it = state.plans.find(key);
    if (it == state.plans.end()) it = state.plans.emplace(key, make_plan(key)).first;
    plan = &it->second;
  }
  LATTICE_CUBLAS_CHECK(cublasLtMatmul(state.handle, plan->op, &alpha, b, plan->a, a, plan->b, &beta, c, plan->c, c,
                                      plan->c, &plan->algo, state.workspace, kWorkspaceBytes, compute_stream()));
}

}  // namespace lattice::cuda
