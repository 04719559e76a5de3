// cuBLASLt matmul (f32, and bf16 into bf16 or f32; optionally with the bias, GELU-aux or DGELU
// epilogue) with descriptors and the heuristic's algorithm cached per problem, and one 32 MiB
// workspace (Hopper's recommended size; ../shared/GPU.md §2).
#include "kernels/cuda/matmul.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/matmul_autotune.h"
#include "kernels/cuda/matmul_probe.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda_workspace.h"
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

constexpr size_t kWorkspaceBytes = kCublasLtWorkspaceBytes;  // kernels/cuda_workspace.h: the memory plan counts it

// The matrix types used here: f32 and bf16.
int element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }
const char* type_name(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : "f32"; }

// The largest power of two (up to 16) that divides the pointer, and at least the element size that
// every pointer of the type has: cuBLASLt picks kernels by it.
int alignment(const void* p, int element) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > element && v % a != 0) a /= 2;
  return a;
}

// One row-major problem as the callers state it: C[M, N] = alpha op(A) op(B) + beta C, `batch` times
// with element strides between consecutive matrices; A and B are of one type, C (and D, the same
// memory) of another. The epilogue (row-major terms): kBias adds a vector of C's type, bias[N], to
// every row; kGeluAux(Bias) writes GELU(product (+ bias)) to C and the GELU's input to an aux matrix
// of C's type and shape (row stride ldc); kDGelu multiplies the product by GELU'(aux), aux read;
// kBiasGrad writes the sums over K of op(A)'s rows, a vector of C's type [M], into the bias pointer
// (cuBLASLt's BGRADB: our A is its B).
enum class Epilogue { kNone, kBias, kGeluAux, kGeluAuxBias, kDGelu, kBiasGrad };
struct Problem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, stride_a, stride_b, stride_c;
  cudaDataType_t ab_type, c_type;
  Epilogue epilogue = Epilogue::kNone;
  int64_t stride_bias = 0;  // elements between the biases of consecutive products of a batch
  bool declinable = false;  // no algorithm: return false (the caller has another way) instead of an error
};

bool has_bias(Epilogue e) { return e == Epilogue::kBias || e == Epilogue::kGeluAuxBias || e == Epilogue::kBiasGrad; }
bool has_aux(Epilogue e) { return e == Epilogue::kGeluAux || e == Epilogue::kGeluAuxBias || e == Epilogue::kDGelu; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kGeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBiasGrad: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::kNone: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// What the descriptors and the chosen algorithm depend on: the column-major problem cuBLASLt runs,
// the types, beta != 0, the operands' alignments, TF32, the epilogue and its bias stride, and whether
// a missing algorithm declines.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, cudaDataType_t, cudaDataType_t, bool, int, int, int, bool, Epilogue, int64_t, bool>;

std::atomic<bool> tf32_enabled{false};
std::atomic<bool> gelu_fusion_enabled{false};
std::atomic<bool> bias_grad_fusion_enabled{false};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false only for an epilogue plan the heuristic has no algorithm for (declined)
  int probe = -1;      // LATTICE_CUBLASLT_PROBE's index of the shape, or -1
  int tuned = -1;      // training.gemm_autotune_dir's index of the shape, or -1
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  float* bias_grad = nullptr;  // gemm_bias_grad's f32 vector, kBiasGradScratchBytes
  std::mutex mutex;
  std::map<Key, Plan> plans;
};

Lt& lt() {
  static Lt* s = [] {
    auto* state = new Lt;  // never destroyed: outlives every static that may still run a matmul
    LATTICE_CUBLAS_CHECK(cublasLtCreate(&state->handle));
    state->workspace = allocate(kWorkspaceBytes);
    state->bias_grad = static_cast<float*>(allocate(kBiasGradScratchBytes));
    return state;
  }();
  return *s;
}

cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  LATTICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    LATTICE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    LATTICE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

// Up to `count` of cuBLASLt's algorithms for plan p's problem, best predicted first, within our
// workspace and the alignments (bytes) of cuBLASLt's A, B and C / D; returns how many it found.
int heuristic(const Plan& p, int align_a, int align_b, int align_c, cublasLtMatmulHeuristicResult_t* results,
              int count) {
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
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt().handle, p.op, p.a, p.b, p.c, p.c, pref, count, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED: cuBLASLt has no heuristic for this configuration at all (its header; seen for a
  // batched GEMM with a bias epilogue): no algorithm, as when it finds none.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return 0;
  LATTICE_CUBLAS_CHECK(status);
  return found;
}

// The epilogue's vector and matrix for the next call of plan op (a null one where the epilogue has
// none). Set before the heuristic too: cuBLASLt reads their alignment from the pointers.
void set_epilogue_pointers(cublasLtMatmulDesc_t op, Epilogue epilogue, const void* bias, const void* aux) {
  if (has_bias(epilogue)) {
    LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  if (has_aux(epilogue)) {
    LATTICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  }
}

// The plan of a problem; bias and aux: its first call's epilogue pointers.
Plan make_plan(const Key& key, const void* bias, const void* aux) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, ab_type, c_type, has_beta, align_a,
              align_b, align_c, tf32, epilogue, stride_bias, declinable] = key;
  Plan p;
  // f32 accumulation and f32 alpha / beta for every type (bf16 inputs too: CUBLAS_COMPUTE_32F).
  LATTICE_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&p.op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (epilogue != Epilogue::kNone) {
    const cublasLtEpilogue_t lt_e = lt_epilogue(epilogue);
    LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_e, sizeof(lt_e)));
  }
  if (has_bias(epilogue)) {
    // Column-major D is [m, n] here (our n rows): the epilogue's bias has one entry per row of D,
    // a bias gradient (BGRADB) one per column. Either is of D's type.
    const cudaDataType_t bias_type = c_type;
    LATTICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    if (batch > 1) {
      const int64_t bias_stride = stride_bias;
      LATTICE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride,
                                                          sizeof(bias_stride)));
    }
  }
  if (has_aux(epilogue)) {
    // The aux matrix has D's shape and leading dimension, and D's type (stated, not left to the
    // default, so that an f32 D cannot silently get another).
    const int64_t aux_ld = ldc;
    const int32_t aux_type = c_type;
    LATTICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    LATTICE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
  }
  // Column-major shapes as stored (before the op): A is m×k (k×m when transposed), B is k×n (n×k).
  p.a = ta ? layout(ab_type, k, m, lda, batch, stride_a) : layout(ab_type, m, k, lda, batch, stride_a);
  p.b = tb ? layout(ab_type, n, k, ldb, batch, stride_b) : layout(ab_type, k, n, ldb, batch, stride_b);
  p.c = layout(c_type, m, n, ldc, batch, stride_c);

  set_epilogue_pointers(p.op, epilogue, bias, aux);
  cublasLtMatmulHeuristicResult_t result{};
  int found = heuristic(p, align_a, align_b, align_c, &result, 1);
  if (found > 0 && result.state != CUBLAS_STATUS_SUCCESS) found = 0;
  if (found == 0 && (epilogue != Epilogue::kNone || declinable)) return p;  // declined: the caller runs other ops
  if (found == 0) {
    throw Error(fmt::format("cuBLASLt has no {} x {} -> {} algorithm for m={} n={} k={} (trans {} {}, ld {} {} {}, "
                            "batch {}, alignment {} {} {}; beta {})",
                            type_name(ab_type), type_name(ab_type), type_name(c_type), m, n, k, ta, tb, lda, ldb, ldc,
                            batch, align_a, align_b, align_c, has_beta ? "!= 0" : "0"));
  }
  p.algo = result.algo;
  p.found = true;
  return p;
}

// The epilogue in words: "none", "bias", "GELU aux", ...
const char* epilogue_words(Epilogue e) {
  switch (e) {
    case Epilogue::kBias: return "bias";
    case Epilogue::kGeluAux: return "GELU aux";
    case Epilogue::kGeluAuxBias: return "GELU aux bias";
    case Epilogue::kDGelu: return "DGELU";
    case Epilogue::kBiasGrad: return "bias gradient";
    case Epilogue::kNone: break;
  }
  return "none";
}

// This call of row-major problem p as the probe and the autotuner time it (matmul_probe.h): the
// plan's descriptors and this call's operands, D into scratch.
probe::Call timed_call(const Problem& p, const Plan& plan, float alpha, const void* a, const void* b, float beta,
                       const void* c_in) {
  const int64_t d_elements = (p.batch - 1) * p.stride_c + (p.m - 1) * p.ldc + p.n;  // row-major D's extent
  const Lt& state = lt();
  return probe::Call{state.handle,
                     plan.op,
                     plan.a,
                     plan.b,
                     plan.c,
                     alpha,
                     beta,
                     b,  // cuBLASLt's A is our b (run's comment)
                     a,
                     c_in,
                     state.workspace,
                     kWorkspaceBytes,
                     static_cast<size_t>(d_elements) * element_bytes(p.c_type),
                     2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) *
                         static_cast<double>(p.batch),
                     fmt::format("{} x {} -> {}, m={} n={} k={} (trans {} {}{}{}, beta {})", type_name(p.ab_type),
                                 type_name(p.ab_type), type_name(p.c_type), p.m, p.n, p.k, p.ta ? 1 : 0, p.tb ? 1 : 0,
                                 p.batch > 1 ? fmt::format(", batch {}", p.batch) : "",
                                 p.epilogue != Epilogue::kNone ? fmt::format(", {}", epilogue_words(p.epilogue)) : "",
                                 beta != 0.0f ? 1 : 0)};
}

// Up to `count` of the heuristic's candidates for the plan (alignments as the plan's key has them).
std::vector<cublasLtMatmulHeuristicResult_t> candidates_for(const Plan& plan, int align_lt_a, int align_lt_b,
                                                            int align_c, int count) {
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(static_cast<size_t>(count));
  candidates.resize(static_cast<size_t>(heuristic(plan, align_lt_a, align_lt_b, align_c, candidates.data(), count)));
  return candidates;
}

// LATTICE_CUBLASLT_PROBE (kernels/cuda/matmul_probe.h): times the plan's algorithm and cuBLASLt's
// other candidates on this call's operands; returns the shape's probe index, or -1.
int probe_plan(const Problem& p, const Plan& plan, int align_lt_a, int align_lt_b, int align_c, float alpha,
               const void* a, const void* b, float beta, const void* c_in) {
  const auto candidates = candidates_for(plan, align_lt_a, align_lt_b, align_c, probe::candidates());
  return probe::measure(timed_call(p, plan, alpha, a, b, beta, c_in), plan.algo, candidates.data(),
                        static_cast<int>(candidates.size()));
}

// The plan's key in words, as training.gemm_autotune_dir's file names a shape: cuBLASLt's
// column-major problem, every field the key has.
std::string key_text(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, ab_type, c_type, has_beta, align_a,
              align_b, align_c, tf32, epilogue, stride_bias, declinable] = key;
  return fmt::format("{} x {} -> {}, column-major m={} n={} k={}, trans {} {}, ld {} {} {}, batch {} strides {} {} "
                     "{}, beta {}, alignment {} {} {}, tf32 {}, epilogue {} (bias stride {}), declinable {}",
                     type_name(ab_type), type_name(ab_type), type_name(c_type), m, n, k, ta ? 1 : 0, tb ? 1 : 0, lda,
                     ldb, ldc, batch, stride_a, stride_b, stride_c, has_beta ? 1 : 0, align_a, align_b, align_c,
                     tf32 ? 1 : 0, epilogue_words(epilogue), stride_bias, declinable ? 1 : 0);
}

// How many of the heuristic's candidates the autotuner times per shape.
constexpr int kAutotuneCandidates = 16;

// training.gemm_autotune_dir (matmul_autotune.h): the plan's algorithm from the file, or chosen now
// by timing the heuristic's candidates on this call's operands and recorded.
// Returns the shape's index for autotune::count_call.
int autotune_plan(const Problem& p, Plan& plan, const Key& key, int align_lt_a, int align_lt_b, int align_c,
                  float alpha, const void* a, const void* b, float beta, const void* c_in) {
  const std::string shape = key_text(key);
  if (const std::optional<cublasLtMatmulAlgo_t> algo = autotune::saved(shape)) {
    cublasLtMatmulHeuristicResult_t checked{};
    if (cublasLtMatmulAlgoCheck(lt().handle, plan.op, plan.a, plan.b, plan.c, plan.c, &*algo, &checked) !=
            CUBLAS_STATUS_SUCCESS ||
        checked.workspaceSize > kWorkspaceBytes) {
      throw InputError(fmt::format("training.gemm_autotune_dir: {} holds an algorithm that cuBLASLt refuses for {} "
                                   "(or that needs more than our {} MiB workspace); delete the file to tune anew",
                                   autotune::file(), shape, kWorkspaceBytes >> 20));
    }
    plan.algo = *algo;
    return autotune::track(shape, false);
  }
  const auto candidates = candidates_for(plan, align_lt_a, align_lt_b, align_c, kAutotuneCandidates);
  const probe::Call call = timed_call(p, plan, alpha, a, b, beta, c_in);
  const probe::Timing t =
      probe::time_candidates(call, plan.algo, candidates.data(), static_cast<int>(candidates.size()));
  autotune::Choice choice{plan.algo, 0, t.used_us, t.used_us, probe::describe(plan.algo)};
  if (t.best >= 0 && t.best_us < t.used_us * (1.0 - autotune::kAutotuneMargin)) {
    const cublasLtMatmulAlgo_t& faster = candidates[static_cast<size_t>(t.best)].algo;
    choice = autotune::Choice{faster, t.best, t.used_us, t.best_us, probe::describe(faster)};
  }
  plan.algo = choice.algo;
  const std::string verdict = choice.candidate == 0
                                  ? fmt::format("kept (none {:.0f}% faster)", 100.0 * autotune::kAutotuneMargin)
                                  : fmt::format("#{}", choice.candidate);
  spdlog::info("cuBLASLt autotune: {}: the heuristic's first {:.1f} us; {} of {} candidates: {:.1f} us ({:+.1f}%; {})",
               call.shape, t.used_us, verdict, candidates.size(), choice.chosen_us,
               t.used_us > 0.0 ? 100.0 * (choice.chosen_us - t.used_us) / t.used_us : 0.0, choice.config);
  autotune::record(shape, choice);
  return autotune::track(shape, true);
}

// Runs a row-major problem with its cached plan; `op` names the caller in errors. `bias` and `aux`:
// the epilogue's vector and matrix, where p.epilogue has them. `c_in`: the matrix beta scales, of
// c's type and layout, when it is not c itself (null: c, in place). false: an epilogue problem
// cuBLASLt has no algorithm for (nothing ran).
bool run(const char* op, const Problem& p, float alpha, const void* a, const void* b, float beta, void* c,
         const void* bias = nullptr, const void* aux = nullptr, const void* c_in = nullptr) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return true;
  LATTICE_CHECK(p.k > 0, "{}: k = 0", op);
  // Every matrix of a batch must meet the alignment the plan promises: the stride counts too.
  auto align = [&](const void* ptr, int64_t stride, cudaDataType_t type) {
    const int element = element_bytes(type);
    const int by_ptr = alignment(ptr, element);
    return p.batch > 1 ? std::min(by_ptr, alignment(reinterpret_cast<const void*>(stride * element), element))
                       : by_ptr;
  };
  const bool tf32 = p.ab_type == CUDA_R_32F && tf32_enabled.load(std::memory_order_relaxed);  // f32 inputs only
  // Row-major C[M,N] is column-major C^T[N,M] = op(B)^T op(A)^T, and a row-major operand read as
  // column-major is its transpose: so cuBLASLt multiplies (b, a) with the same transpose flags, and
  // its A is our b.
  if (c_in == nullptr) c_in = c;
  // C and D share one layout, so one alignment: the lesser of the two matrices'.
  const int align_c = std::min(align(c, p.stride_c, p.c_type), align(c_in, p.stride_c, p.c_type));
  const int align_lt_a = align(b, p.stride_b, p.ab_type), align_lt_b = align(a, p.stride_a, p.ab_type);
  const Key key{p.tb, p.ta, p.n, p.m, p.k, p.ldb, p.lda, p.ldc, p.batch, p.stride_b, p.stride_a, p.stride_c,
                p.ab_type, p.c_type, beta != 0.0f, align_lt_a, align_lt_b, align_c,
                tf32, p.epilogue, p.stride_bias, p.declinable};
  Lt& state = lt();
  // Held through the call: an epilogue plan's descriptor takes this call's bias and aux pointers,
  // which the call reads when it is made (the descriptor is shared by every call of the shape).
  std::lock_guard<std::mutex> lock(state.mutex);
  auto it = state.plans.find(key);
  const bool first_call = it == state.plans.end();
  if (first_call) it = state.plans.emplace(key, make_plan(key, bias, aux)).first;
  Plan& plan = it->second;
  if (!plan.found) {
    if (first_call) spdlog::info("cuBLASLt has no algorithm for {}: {} runs it as separate ops", key_text(key), op);
    return false;
  }
  set_epilogue_pointers(plan.op, p.epilogue, bias, aux);
  if (first_call && autotune::enabled()) {
    plan.tuned = autotune_plan(p, plan, key, align_lt_a, align_lt_b, align_c, alpha, a, b, beta, c_in);
  }
  if (first_call && probe::candidates() > 0) {
    plan.probe = probe_plan(p, plan, align_lt_a, align_lt_b, align_c, alpha, a, b, beta, c_in);
  }
  if (plan.probe >= 0) probe::count_call(plan.probe);
  if (plan.tuned >= 0) autotune::count_call(plan.tuned);
  const cublasStatus_t status = cublasLtMatmul(state.handle, plan.op, &alpha, b, plan.a, a, plan.b, &beta, c_in, plan.c,
                                               c, plan.c, &plan.algo, state.workspace, kWorkspaceBytes, compute_stream());
  // An algorithm the heuristic gave may still be refused when called (its header: e.g. alignment):
  // where the caller has another way, every call of the shape takes it from now on (nothing ran).
  if (status == CUBLAS_STATUS_NOT_SUPPORTED && (p.epilogue != Epilogue::kNone || p.declinable)) {
    plan.found = false;
    spdlog::warn("cuBLASLt refused {} when called (CUBLAS_STATUS_NOT_SUPPORTED): {} runs it as separate ops",
                 key_text(key), op);
    return false;
  }
  LATTICE_CUBLAS_CHECK(status);
  return true;
}

}  // namespace

void set_tf32(bool enabled) { tf32_enabled.store(enabled, std::memory_order_relaxed); }
void set_gelu_fusion(bool enabled) { gelu_fusion_enabled.store(enabled, std::memory_order_relaxed); }
void set_bias_grad_fusion(bool enabled) { bias_grad_fusion_enabled.store(enabled, std::memory_order_relaxed); }

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // op(a) op(b) is empty, so c = beta c (cuBLASLt does not take k = 0). BLAS semantics: beta = 0
    // sets c to zero whatever it held.
    LATTICE_CHECK(ldc == n, "sgemm: k = 0 with a strided c (ldc {} != n {}) is not supported on cuda", ldc, n);
    if (beta == 0.0f) {
      fill_f32(c, m * n, 0.0f);
    } else {
      scale_f32(c, m * n, beta);
    }
    return;
  }
  sgemm_strided_batched(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

void sgemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                           int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                           float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  run("sgemm_strided_batched",
      Problem{trans_a, trans_b, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, CUDA_R_32F, CUDA_R_32F},
      alpha, a, b, beta, c);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16, int64_t ldc) {
  run("gemm_bf16",
      Problem{trans_a, trans_b, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, CUDA_R_16BF, c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F},
      alpha, a, b, beta, c);
}

namespace {
// A single product (no batch) with `epilogue`, as the epilogue entries state it.
Problem epilogue_problem(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                         int64_t ldc, bool ab_bf16, bool c_bf16, Epilogue epilogue) {
  Problem p{trans_a, trans_b, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, ab_bf16 ? CUDA_R_16BF : CUDA_R_32F,
            c_bf16 ? CUDA_R_16BF : CUDA_R_32F};
  p.epilogue = epilogue;
  return p;
}

// What the GELU epilogues take besides an epilogue plan: training.gelu_fusion on, and the shape
// and pointer rules of matmul.h (the header's aux ld rule; the bias's 16-byte vector loads).
bool gelu_epilogue_takes(int64_t m, int64_t n, int64_t k, int64_t ldc, const void* bias, const void* aux) {
  return gelu_fusion_enabled.load(std::memory_order_relaxed) && gelu_epilogue_fits(m, n, k, ldc, bias, aux);
}
}  // namespace

bool gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* c, bool c_bf16, int64_t ldc) {
  if (!bias_epilogue_fits(m, n, k, bias)) return false;  // the caller then adds the bias separately
  return run("gemm_bias", epilogue_problem(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_bf16, c_bf16, Epilogue::kBias),
             1.0f, a, b, 0.0f, c, bias);
}

bool gemm_residual(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, bool ab_bf16, const void* bias, const void* residual, void* c,
                   bool c_bf16, int64_t ldc) {
  if (!bias_epilogue_fits(m, n, k, bias)) return false;
  Problem p = epilogue_problem(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_bf16, c_bf16,
                               bias != nullptr ? Epilogue::kBias : Epilogue::kNone);
  p.declinable = true;
  return run("gemm_residual", p, 1.0f, a, b, 1.0f, c, bias, nullptr, residual);
}

bool gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                  int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, bool ab_bf16, const void* bias,
                  int64_t stride_bias, float beta, void* c, bool c_bf16, int64_t ldc, int64_t stride_c,
                  int64_t batch) {
  // As gemm_bias: the epilogue's vector loads need every bias of the batch 16-byte aligned (matmul.h).
  if (!batched_gemm_fits(m, n, k, batch, ab_bf16, c_bf16, bias, stride_bias)) return false;
  Problem p{trans_a, trans_b, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c,
            ab_bf16 ? CUDA_R_16BF : CUDA_R_32F, c_bf16 ? CUDA_R_16BF : CUDA_R_32F};
  p.epilogue = bias != nullptr ? Epilogue::kBias : Epilogue::kNone;
  p.stride_bias = stride_bias;
  p.declinable = true;
  return run("gemm_batched", p, bias != nullptr ? 1.0f : alpha, a, b, bias != nullptr ? 0.0f : beta, c, bias);
}

bool gemm_gelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* pre, void* out, bool c_bf16, int64_t ldc) {
  if (!gelu_epilogue_takes(m, n, k, ldc, bias, pre)) return false;
  const Epilogue epilogue = bias != nullptr ? Epilogue::kGeluAuxBias : Epilogue::kGeluAux;
  return run("gemm_gelu", epilogue_problem(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_bf16, c_bf16, epilogue), 1.0f,
             a, b, 0.0f, out, bias, pre);
}

bool gemm_dgelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
                int64_t ldb, bool ab_bf16, const void* pre, void* dx, bool c_bf16, int64_t ldc) {
  if (!gelu_epilogue_takes(m, n, k, ldc, nullptr, pre)) return false;
  return run("gemm_dgelu",
             epilogue_problem(trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_bf16, c_bf16, Epilogue::kDGelu), 1.0f, a, b,
             0.0f, dx, nullptr, pre);
}

bool gemm_bias_grad(int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                    bool ab_bf16, float* c, float* bias_grad) {
  if (!bias_grad_fusion_enabled.load(std::memory_order_relaxed) || !bias_grad_epilogue_fits(m, n, k)) return false;
  // BGRADB writes its vector rather than adding to it: into scratch, then added to the gradient
  // that accumulates over micro-batches (one small kernel; the stream orders the next call's
  // write after this add).
  float* scratch = lt().bias_grad;
  if (!run("gemm_bias_grad", epilogue_problem(true, false, m, n, k, lda, ldb, n, ab_bf16, false, Epilogue::kBiasGrad),
           1.0f, a, b, 1.0f, c, scratch)) {
    return false;
  }
  add(DataIn{bias_grad, false}, DataIn{scratch, false}, DataOut{bias_grad, false}, m);
  return true;
}

}  // namespace lattice::cuda
