// kernels/cuda/matmul.h for the emulated CUDA backend: the CPU's sgemm (OpenBLAS) in place of
// cuBLASLt, with cuBLASLt's contracts: bf16 operands widened exactly, f32 accumulation, one
// rounding of a bf16 result; the bias epilogue adds the bias to the f32 product before that one
// rounding, and a residual read as C (beta 1) is added after the bias; the GELU epilogues apply kernels' GELU (kernels/cpu/activation.h) to that f32 result
// and decline what cuBLASLt's wrapper declines. Each call is one item of the compute stream, as a
// cuBLASLt call is. It checks the ops layer's use of these entries, not cuBLASLt.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda_workspace.h"
#include "tests/cuda_emu/streams.h"

namespace lattice::cuda {
namespace {

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

// op(a) op(b) in f32 ([m, n], row stride n): bf16 operands (ab_bf16) widened exactly first.
std::vector<float> product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                           const void* b, int64_t ldb, bool ab_bf16) {
  std::vector<float> wa, wb;
  const float* fa = static_cast<const float*>(a);
  const float* fb = static_cast<const float*>(b);
  if (ab_bf16) {
    wa = widen_operand(a, trans_a, m, k, lda);
    wb = widen_operand(b, trans_b, k, n, ldb);
    fa = wa.data();
    fb = wb.data();
  }
  std::vector<float> out(static_cast<size_t>(m * n), 0.0f);
  cpu::sgemm(trans_a, trans_b, m, n, k, 1.0f, fa, lda, fb, ldb, 0.0f, out.data(), n);
  return out;
}

// Element i of a bf16 (is_bf16) or f32 array, and its store with one rounding.
float load(const void* p, bool is_bf16, int64_t i) {
  return is_bf16 ? bfloat16_to_float(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
void store(void* p, bool is_bf16, int64_t i, float v) {
  if (is_bf16) {
    static_cast<uint16_t*>(p)[i] = float_to_bfloat16(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

std::atomic<bool> gelu_fusion_enabled{false};

// The cuBLASLt wrapper's workspace (kernels/cuda/matmul.cc), allocated at the first GEMM and kept, so
// that the emulated pool's high mark holds it as a GPU's does (the memory plan counts it).
void hold_cublaslt_workspace() {
  static void* const workspace = allocate(static_cast<size_t>(kCublasLtWorkspaceBytes));
  (void)workspace;
}

// As the cuBLASLt wrapper's gelu_epilogue_takes (kernels/cuda/matmul.cc).
bool gelu_epilogue_takes(int64_t m, int64_t n, int64_t k, int64_t ldc, const void* bias, const void* aux) {
  return gelu_fusion_enabled.load() && gelu_epilogue_fits(m, n, k, ldc, bias, aux);
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  hold_cublaslt_workspace();
  emu::run_on(nullptr, [=] { cpu::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
}

void sgemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                           int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                           float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  hold_cublaslt_workspace();
  emu::run_on(nullptr, [=] {
    for (int64_t i = 0; i < batch; ++i) {
      cpu::sgemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
                 ldc);
    }
  });
}

namespace {
// The bodies of gemm_bf16 and gemm_bias, run where the caller's stream item runs.
void gemm_bf16_now(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16, int64_t ldc) {
  const std::vector<float> wa = widen_operand(a, trans_a, m, k, lda);
  const std::vector<float> wb = widen_operand(b, trans_b, k, n, ldb);
  if (!c_is_bf16) {
    cpu::sgemm(trans_a, trans_b, m, n, k, alpha, wa.data(), lda, wb.data(), ldb, beta, static_cast<float*>(c), ldc);
    return;
  }
  auto* cb = static_cast<uint16_t*>(c);
  std::vector<float> wc = beta != 0.0f ? widen(cb, m, n, ldc) : std::vector<float>(static_cast<size_t>(m * ldc), 0.0f);
  cpu::sgemm(trans_a, trans_b, m, n, k, alpha, wa.data(), lda, wb.data(), ldb, beta, wc.data(), ldc);
  for (int64_t i = 0; i < m; ++i) cpu::f32_to_bf16(wc.data() + i * ldc, cb + i * ldc, n);
}

void gemm_bias_now(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, bool ab_bf16, const void* bias, void* c, bool c_bf16, int64_t ldc) {
  const std::vector<float> p = product(trans_a, trans_b, m, n, k, a, lda, b, ldb, ab_bf16);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) store(c, c_bf16, i * ldc + j, p[i * n + j] + load(bias, c_bf16, j));
}

// The address `elements` elements of `size` bytes after p.
template <typename T>
T* advance(T* p, int64_t elements, int64_t size) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + elements * size);
}
}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, void* c, bool c_is_bf16, int64_t ldc) {
  hold_cublaslt_workspace();
  emu::run_on(nullptr, [=] { gemm_bf16_now(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, c_is_bf16, ldc); });
}

bool gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* c, bool c_bf16, int64_t ldc) {
  hold_cublaslt_workspace();
  if (!bias_epilogue_fits(m, n, k, bias)) return false;  // as cuBLASLt's
  emu::run_on(nullptr, [=] { gemm_bias_now(trans_a, trans_b, m, n, k, a, lda, b, ldb, ab_bf16, bias, c, c_bf16, ldc); });
  return true;
}

bool gemm_residual(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, bool ab_bf16, const void* bias, const void* residual, void* c,
                   bool c_bf16, int64_t ldc) {
  hold_cublaslt_workspace();
  if (!bias_epilogue_fits(m, n, k, bias)) return false;  // as cuBLASLt's
  emu::run_on(nullptr, [=] {
    // (product + bias) + residual in f32, c rounded once: in f32 the CPU's matmul_bias then add.
    const std::vector<float> p = product(trans_a, trans_b, m, n, k, a, lda, b, ldb, ab_bf16);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float with_bias = bias != nullptr ? p[i * n + j] + load(bias, c_bf16, j) : p[i * n + j];
        store(c, c_bf16, i * ldc + j, with_bias + load(residual, c_bf16, i * ldc + j));
      }
  });
  return true;
}

bool gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                  int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, bool ab_bf16, const void* bias,
                  int64_t stride_bias, float beta, void* c, bool c_bf16, int64_t ldc, int64_t stride_c,
                  int64_t batch) {
  hold_cublaslt_workspace();
  if (!batched_gemm_fits(m, n, k, batch, ab_bf16, c_bf16, bias, stride_bias)) return false;
  const int64_t ab_element = ab_bf16 ? 2 : 4, c_element = c_bf16 ? 2 : 4;
  // One stream item, as one cuBLASLt call; each product as the single entries compute it.
  emu::run_on(nullptr, [=] {
    for (int64_t i = 0; i < batch; ++i) {
      const void* ai = advance(a, i * stride_a, ab_element);
      const void* bi = advance(b, i * stride_b, ab_element);
      void* ci = advance(c, i * stride_c, c_element);
      if (bias != nullptr) {
        gemm_bias_now(trans_a, trans_b, m, n, k, ai, lda, bi, ldb, ab_bf16, advance(bias, i * stride_bias, c_element),
                      ci, c_bf16, ldc);
      } else if (ab_bf16) {
        gemm_bf16_now(trans_a, trans_b, m, n, k, alpha, static_cast<const uint16_t*>(ai), lda,
                      static_cast<const uint16_t*>(bi), ldb, beta, ci, c_bf16, ldc);
      } else {
        cpu::sgemm(trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(ai), lda, static_cast<const float*>(bi),
                   ldb, beta, static_cast<float*>(ci), ldc);
      }
    }
  });
  return true;
}

bool gemm_gelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
               int64_t ldb, bool ab_bf16, const void* bias, void* pre, void* out, bool c_bf16, int64_t ldc) {
  hold_cublaslt_workspace();
  if (!gelu_epilogue_takes(m, n, k, ldc, bias, pre)) return false;
  emu::run_on(nullptr, [=] {
    std::vector<float> p = product(trans_a, trans_b, m, n, k, a, lda, b, ldb, ab_bf16);
    if (bias != nullptr)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) p[i * n + j] += load(bias, c_bf16, j);
    std::vector<float> g(p.size());
    cpu::gelu_forward(p.data(), g.data(), m * n);
    for (int64_t i = 0; i < m * n; ++i) {
      store(pre, c_bf16, i, p[i]);
      store(out, c_bf16, i, g[i]);
    }
  });
  return true;
}

bool gemm_dgelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
                int64_t ldb, bool ab_bf16, const void* pre, void* dx, bool c_bf16, int64_t ldc) {
  hold_cublaslt_workspace();
  if (!gelu_epilogue_takes(m, n, k, ldc, nullptr, pre)) return false;
  emu::run_on(nullptr, [=] {
    const std::vector<float> p = product(trans_a, trans_b, m, n, k, a, lda, b, ldb, ab_bf16);
    std::vector<float> x(p.size()), d(p.size());
    for (int64_t i = 0; i < m * n; ++i) x[i] = load(pre, c_bf16, i);
    cpu::gelu_backward(p.data(), x.data(), d.data(), m * n);
    for (int64_t i = 0; i < m * n; ++i) store(dx, c_bf16, i, d[i]);
  });
  return true;
}

void set_tf32(bool) {}  // the CPU has no TF32: exact f32 either way
void set_gelu_fusion(bool enabled) { gelu_fusion_enabled.store(enabled); }

}  // namespace lattice::cuda
