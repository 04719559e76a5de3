// cuBLASLt for the emulated CUDA backend (shim/cublasLt.h), so that kernels/cuda/matmul.cc itself
// runs here: its descriptors are read back into the row-major problem the wrapper started from
// (cuBLASLt's column-major D[m, n] = op(A) op(B) is row-major D^T = op(B)^T op(A)^T), which the
// CPU's sgemm (OpenBLAS) computes with cuBLASLt's contracts: bf16 operands widened exactly, f32
// accumulation, one rounding of a bf16 result; an epilogue's bias is added to the f32 product
// before that rounding, C (beta) after the bias; the GELU epilogues apply kernels' GELU
// (kernels/cpu/activation.h) to that f32 result; BGRADB sums op(B)'s columns in f32 in K's order
// (split as the product is). A plain in-place product is the CPU's own sgemm
// call with beta, so f32 results are the CPU backend's bits. The heuristic offers three algorithms
// (for LATTICE_CUBLASLT_PROBE and training.gemm_autotune_dir): algorithm i splits K into i + 1 parts
// whose f32 products are added in order, as a split-K kernel would, so only the first gives the CPU's
// bits. LATTICE_EMU_CUBLASLT_SLOW_ALGOS=0,2 (say) makes each call of those algorithms take 2 ms
// more, so that a test knows which one timing picks. Each call is one item of its stream, as a
// cuBLASLt call is. It checks the wrapper's use of cuBLASLt, not cuBLASLt.
#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/matmul.h"
#include "tests/cuda_emu/streams.h"

struct cublasLtContext {};

struct cublasLtMatmulDescOpaque_t {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  int64_t bias_stride = 0;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = CUDA_R_32F;
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {};

namespace {

using namespace lattice;

constexpr int kAlgorithms = 3;

// Copies an attribute's value, as cuBLASLt does, refusing a size that is not the attribute's.
template <class T>
cublasStatus_t set(T& field, const void* buf, size_t size) {
  if (size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool is_bf16(cudaDataType_t type) { return type == CUDA_R_16BF; }
int64_t element_bytes(cudaDataType_t type) { return is_bf16(type) ? 2 : 4; }

template <typename T>
T* advance(T* p, int64_t elements, int64_t size) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + elements * size);
}

float load(const void* p, bool bf16, int64_t i) {
  return bf16 ? bfloat16_to_float(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
void store(void* p, bool bf16, int64_t i, float v) {
  if (bf16) {
    static_cast<uint16_t*>(p)[i] = float_to_bfloat16(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

// The rows x cols matrix at p with row stride ld, widened to f32 (same stride; the gaps are 0).
std::vector<float> widen(const uint16_t* p, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * ld), 0.0f);
  for (int64_t i = 0; i < rows; ++i) cpu::bf16_to_f32(p + i * ld, out.data() + i * ld, cols);
  return out;
}

// A stored operand whose op() is r x c: r x c as stored, c x r if transposed.
std::vector<float> widen_operand(const void* p, bool trans, int64_t r, int64_t c, int64_t ld) {
  return trans ? widen(static_cast<const uint16_t*>(p), c, r, ld) : widen(static_cast<const uint16_t*>(p), r, c, ld);
}

// One row-major product of the call: c_out[m, n] (row stride ldc) from op(a) op(b), C and the
// epilogue, everything at this product's addresses.
struct Product {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  const void* a;
  const void* b;
  bool ab_bf16, c_bf16;
  float alpha, beta;
  const void* c_in;
  void* c_out;
  cublasLtEpilogue_t epilogue;
  const void* bias;  // of c's type (matmul.cc states it so); BGRADB writes it
  void* aux;         // of c's type, row stride aux_ld
  int64_t aux_ld;
  int64_t splits;    // parts of K (the algorithm's split-K)
};

// p's operands in f32: as stored, or widened exactly from bf16 into wa and wb (same strides).
struct F32Operands {
  std::vector<float> wa, wb;
  const float* a;
  const float* b;
};
F32Operands f32_operands(const Product& p) {
  F32Operands o{{}, {}, static_cast<const float*>(p.a), static_cast<const float*>(p.b)};
  if (p.ab_bf16) {
    o.wa = widen_operand(p.a, p.ta, p.m, p.k, p.lda);
    o.wb = widen_operand(p.b, p.tb, p.k, p.n, p.ldb);
    o.a = o.wa.data();
    o.b = o.wb.data();
  }
  return o;
}

// op(a) op(b) in f32 ([m, n], row stride n): K in p.splits parts, their products added in order.
std::vector<float> product(const Product& p) {
  const F32Operands o = f32_operands(p);
  std::vector<float> out(static_cast<size_t>(p.m * p.n), 0.0f), part;
  for (int64_t s = 0; s < p.splits; ++s) {
    const int64_t k0 = p.k * s / p.splits, k1 = p.k * (s + 1) / p.splits;
    if (k1 == k0) continue;
    // Columns k0.. of op(a) [m, k] and rows k0.. of op(b) [k, n], as stored.
    const float* a = o.a + (p.ta ? k0 * p.lda : k0);
    const float* b = o.b + (p.tb ? k0 : k0 * p.ldb);
    if (s == 0) {
      cpu::sgemm(p.ta, p.tb, p.m, p.n, k1 - k0, 1.0f, a, p.lda, b, p.ldb, 0.0f, out.data(), p.n);
      continue;
    }
    part.assign(out.size(), 0.0f);
    cpu::sgemm(p.ta, p.tb, p.m, p.n, k1 - k0, 1.0f, a, p.lda, b, p.ldb, 0.0f, part.data(), p.n);
    for (size_t i = 0; i < out.size(); ++i) out[i] += part[i];
  }
  return out;
}

// BGRADB: bias[i] = the sum over K of op(a)'s row i ([m]), in f32, K in p.splits parts added in
// order as the product's are.
void bias_gradient(const Product& p) {
  const F32Operands o = f32_operands(p);
  for (int64_t i = 0; i < p.m; ++i) {
    float total = 0.0f;
    for (int64_t s = 0; s < p.splits; ++s) {
      float part = 0.0f;
      for (int64_t kk = p.k * s / p.splits; kk < p.k * (s + 1) / p.splits; ++kk) {
        part += p.ta ? o.a[kk * p.lda + i] : o.a[i * p.lda + kk];
      }
      total = s == 0 ? part : total + part;
    }
    store(const_cast<void*>(p.bias), p.c_bf16, i, total);
  }
}

// LATTICE_EMU_CUBLASLT_SLOW_ALGOS: whether calls of algorithm `id` take 2 ms more.
bool slow_algorithm(uint64_t id) {
  static const std::vector<uint64_t> slow = [] {
    std::vector<uint64_t> ids;
    const char* v = std::getenv("LATTICE_EMU_CUBLASLT_SLOW_ALGOS");
    std::stringstream list(v != nullptr ? v : "");
    for (std::string item; std::getline(list, item, ',');) {
      if (!item.empty()) ids.push_back(std::stoull(item));
    }
    return ids;
  }();
  return std::find(slow.begin(), slow.end(), id) != slow.end();
}

void compute(const Product& p) {
  const bool in_place = p.c_in == p.c_out;
  if (p.epilogue == CUBLASLT_EPILOGUE_DEFAULT && (in_place || p.beta == 0.0f) && p.splits == 1) {
    // The CPU backend's own call: sgemm with alpha and beta into C (widened from bf16 and rounded once).
    const F32Operands o = f32_operands(p);
    if (!p.c_bf16) {
      cpu::sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, o.a, p.lda, o.b, p.ldb, p.beta, static_cast<float*>(p.c_out),
                 p.ldc);
      return;
    }
    auto* cb = static_cast<uint16_t*>(p.c_out);
    std::vector<float> wc =
        p.beta != 0.0f ? widen(cb, p.m, p.n, p.ldc) : std::vector<float>(static_cast<size_t>(p.m * p.ldc), 0.0f);
    cpu::sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, o.a, p.lda, o.b, p.ldb, p.beta, wc.data(), p.ldc);
    for (int64_t i = 0; i < p.m; ++i) cpu::f32_to_bf16(wc.data() + i * p.ldc, cb + i * p.ldc, p.n);
    return;
  }
  // The product in f32, then the epilogue's terms in order, one rounding.
  std::vector<float> t = product(p);
  const bool bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float& v = t[i * p.n + j];
      if (p.alpha != 1.0f) v *= p.alpha;
      if (bias) v += load(p.bias, p.c_bf16, j);
    }
  }
  if (p.epilogue == CUBLASLT_EPILOGUE_GELU_AUX || p.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
    std::vector<float> g(t.size());
    cpu::gelu_forward(t.data(), g.data(), p.m * p.n);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) store(p.aux, p.c_bf16, i * p.aux_ld + j, t[i * p.n + j]);
    }
    t = std::move(g);
  } else if (p.epilogue == CUBLASLT_EPILOGUE_DGELU) {
    std::vector<float> x(t.size()), d(t.size());
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) x[i * p.n + j] = load(p.aux, p.c_bf16, i * p.aux_ld + j);
    }
    cpu::gelu_backward(t.data(), x.data(), d.data(), p.m * p.n);
    t = std::move(d);
  } else if (p.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    bias_gradient(p);
  }
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float v = t[i * p.n + j];
      if (p.beta != 0.0f) v += p.beta == 1.0f ? load(p.c_in, p.c_bf16, i * p.ldc + j)
                                              : p.beta * load(p.c_in, p.c_bf16, i * p.ldc + j);
      store(p.c_out, p.c_bf16, i * p.ldc + j, v);
    }
  }
}

}  // namespace

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

size_t cublasLtGetVersion(void) { return 130000; }  // the emulator's own number, as a file of choices records it

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t, cudaDataType_t scale) {
  if (scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;  // the wrapper's alpha and beta are f32
  *desc = new cublasLtMatmulDescOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(desc->trans_a, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(desc->trans_b, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(desc->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(desc->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set(desc->bias_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(desc->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(desc->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(desc->bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set(desc->aux_type, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;  // column-major: ld >= rows
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(layout->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set(layout->stride, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;  // the CPU's GEMM needs no workspace and takes any alignment
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
// LATTICE_EMU_CUBLASLT_REFUSE=heuristic or =launch: cuBLASLt's two ways of refusing a problem the
// wrapper has another way for, which a real cuBLASLt may take for some configurations (its header;
// reports exist for a batched GEMM with a bias epilogue): the heuristic returns NOT_SUPPORTED, or it
// offers algorithms and cublasLtMatmul then returns NOT_SUPPORTED. Refused: every epilogue, a batch
// whose A or B is shared (stride 0), and at launch a C read (beta != 0) that is not D.
bool refuses(const char* when, cublasLtMatmulDesc_t desc, const cublasLtMatrixLayoutOpaque_t& a,
             const cublasLtMatrixLayoutOpaque_t& b, bool c_is_not_d) {
  static const std::string mode = [] {
    const char* v = std::getenv("LATTICE_EMU_CUBLASLT_REFUSE");
    return std::string(v != nullptr ? v : "");
  }();
  if (mode != when) return false;
  const bool shared_operand = a.batch > 1 && (a.stride == 0 || b.stride == 0);
  return desc->epilogue != CUBLASLT_EPILOGUE_DEFAULT || shared_operand || c_is_not_d;
}

// Which of the epilogue's pointers the descriptor's epilogue reads.
bool has_bias(cublasLtMatmulDesc_t desc) {
  return desc->epilogue == CUBLASLT_EPILOGUE_BIAS || desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         desc->epilogue == CUBLASLT_EPILOGUE_BGRADB;
}
bool has_aux(cublasLtMatmulDesc_t desc) {
  return desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         desc->epilogue == CUBLASLT_EPILOGUE_DGELU;
}
}  // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  // cuBLASLt reads the epilogue's pointers' alignment when it chooses, so the wrapper must have set
  // them by now (a null one would read as aligned).
  if ((has_bias(desc) && desc->bias == nullptr) || (has_aux(desc) && desc->aux == nullptr)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (refuses("heuristic", desc, *a, *b, false)) return CUBLAS_STATUS_NOT_SUPPORTED;
  *returned = std::min(requested, kAlgorithms);
  for (int i = 0; i < *returned; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].algo.data[0] = static_cast<uint64_t>(i);
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t size,
                                                    size_t* written) {
  // Algorithm i: id i, K split into i + 1 parts; the rest 0.
  const int32_t value = attr == CUBLASLT_ALGO_CONFIG_ID ? static_cast<int32_t>(algo->data[0])
                        : attr == CUBLASLT_ALGO_CONFIG_SPLITK_NUM ? static_cast<int32_t>(algo->data[0] + 1)
                                                                  : 0;
  if (size != sizeof(value)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &value, sizeof(value));
  if (written != nullptr) *written = sizeof(value);
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
// What cuBLASLt checks of a call: the shapes agree, C is D's layout, A and B of one type, one of the
// algorithms given.
using LayoutRef = const cublasLtMatrixLayoutOpaque_t&;
bool call_agrees(cublasLtMatmulDesc_t desc, LayoutRef A, LayoutRef B, LayoutRef C, LayoutRef D,
                 const cublasLtMatmulAlgo_t* algo) {
  const bool ta = desc->trans_a == CUBLAS_OP_T, tb = desc->trans_b == CUBLAS_OP_T;
  const uint64_t m = D.rows, n = D.cols, k = ta ? A.rows : A.cols;
  return (ta ? A.cols : A.rows) == m && (tb ? B.rows : B.cols) == n && (tb ? B.cols : B.rows) == k &&
         C.rows == D.rows && C.cols == D.cols && C.ld == D.ld && C.type == D.type && A.type == B.type &&
         A.batch == B.batch && A.batch == D.batch && C.stride == D.stride && algo != nullptr &&
         algo->data[0] < kAlgorithms;
}
}  // namespace

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (!call_agrees(desc, *a, *b, *c, *d, algo)) return CUBLAS_STATUS_INVALID_VALUE;
  *result = cublasLtMatmulHeuristicResult_t{};
  result->algo = *algo;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t stream) {
  const auto& A = *a_layout;
  const auto& B = *b_layout;
  const auto& D = *d_layout;
  if (!call_agrees(desc, A, B, *c_layout, D, algo)) return CUBLAS_STATUS_INVALID_VALUE;
  if (refuses("launch", desc, A, B, c != d && *static_cast<const float*>(beta) != 0.0f)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const bool ta = desc->trans_a == CUBLAS_OP_T, tb = desc->trans_b == CUBLAS_OP_T;
  const int64_t m = static_cast<int64_t>(D.rows), n = static_cast<int64_t>(D.cols);
  const int64_t k = static_cast<int64_t>(ta ? A.rows : A.cols);
  // The emulated epilogues read the bias and aux in D's type, as the wrapper states them.
  if ((has_bias(desc) && desc->bias_type != D.type) ||
      (has_aux(desc) && (desc->aux_type != D.type || desc->aux_ld != D.ld))) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // Row-major: D^T[n, m] = op(B)^T op(A)^T, i.e. our m = cuBLASLt's n, our a = its B (same flags).
  Product p{tb,
            ta,
            n,
            m,
            k,
            B.ld,
            A.ld,
            D.ld,
            b,
            a,
            is_bf16(A.type),
            is_bf16(D.type),
            *static_cast<const float*>(alpha),
            *static_cast<const float*>(beta),
            c,
            d,
            desc->epilogue,
            desc->bias,
            desc->aux,
            desc->aux_ld,
            static_cast<int64_t>(algo->data[0]) + 1};
  const int64_t batch = D.batch, ab = element_bytes(A.type), cd = element_bytes(D.type);
  const int64_t stride_a = A.stride, stride_b = B.stride, stride_c = D.stride, stride_bias = desc->bias_stride;
  const bool slow = slow_algorithm(algo->data[0]);
  lattice::emu::run_on(stream, [=] {
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int64_t i = 0; i < batch; ++i) {
      Product q = p;
      q.a = advance(p.a, i * stride_b, ab);  // our a is cuBLASLt's B
      q.b = advance(p.b, i * stride_a, ab);
      q.c_in = advance(p.c_in, i * stride_c, cd);
      q.c_out = advance(p.c_out, i * stride_c, cd);
      if (p.bias != nullptr) q.bias = advance(p.bias, i * stride_bias, cd);
      compute(q);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
