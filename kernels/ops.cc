// The public ops (kernels/ops.h): check devices, dtypes and shapes with messages that name the op
// and the shapes, then call the kernel of the tensors' backend (kernels/backend.h), with bf16 data
// operands staged through f32 (kernels/f32_staging.h). adamw_update lives in adamw.cc.
#include "kernels/ops.h"

#include <optional>

#include <fmt/format.h>

#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/f32_staging.h"
#include "kernels/op_profile.h"
#include "kernels/stream.h"

namespace lattice::ops {

namespace {

void need_f32(const char* op, const char* name, const Tensor& t) {
  LATTICE_CHECK(t.defined(), "{}: `{}` is undefined", op, name);
  LATTICE_CHECK(t.dtype() == DType::kF32, "{}: `{}` must be f32, got {}", op, name, t.describe());
}

// A data operand (activation, parameter or their gradient): f32, or bf16 staged through f32.
void need_data(const char* op, const char* name, const Tensor& t) {
  LATTICE_CHECK(t.defined(), "{}: `{}` is undefined", op, name);
  LATTICE_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16, "{}: `{}` must be f32 or bf16, got {}", op,
                name, t.describe());
}

void need_i32(const char* op, const char* name, const Tensor& t) {
  LATTICE_CHECK(t.defined(), "{}: `{}` is undefined", op, name);
  LATTICE_CHECK(t.dtype() == DType::kI32, "{}: `{}` must be i32, got {}", op, name, t.describe());
}

void need_numel(const char* op, const char* name, const Tensor& t, int64_t numel, const char* why) {
  LATTICE_CHECK(t.numel() == numel, "{}: `{}` is {}, expected {} elements ({})", op, name, t.describe(), numel,
                why);
}

// Last dimension of a tensor seen as [N, H]; rank 0 counts as [1, 1].
int64_t last_dim(const Tensor& t) { return t.rank() == 0 ? 1 : t.dim(-1); }
int64_t flat_rows(const Tensor& t) {
  const int64_t h = last_dim(t);
  return h == 0 ? 0 : t.numel() / h;
}

// The FLOPs OpScope reports (before the op checks its operands: 0 for undefined ones). A product
// c[m, n] = op(a) op(b) is 2 m n k, and a holds m k elements whichever way it is transposed.
double gemm_flops(const Tensor& a, const Tensor& c) {
  return a.defined() && c.defined() ? 2.0 * static_cast<double>(a.numel()) * static_cast<double>(last_dim(c)) : 0.0;
}
// A gather's traffic: its ids, its dense side (out, or dout), and the table rows the ids select: one
// row of the dense side's width per id, in the table's dtype, moved `trips` times (2 where the rows
// are read and written back). -1 (count the operands) for undefined tensors.
double gather_bytes(const Tensor& ids, const Tensor& table, const Tensor& dense, double trips) {
  if (!ids.defined() || !table.defined() || !dense.defined()) return -1;
  return static_cast<double>(ids.bytes() + dense.bytes()) +
         trips * static_cast<double>(dense.numel()) * static_cast<double>(dtype_size(table.dtype()));
}
// Causal attention over q [B, T, Hq, D], as FlashAttention counts it: QK^T and PV are 4 B Hq T^2 D,
// half of it under the causal mask; the backward does 2.5 times the forward's.
double attention_forward_flops(const Tensor& q) {
  return q.defined() && q.rank() == 4 ? 2.0 * static_cast<double>(q.numel()) * static_cast<double>(q.dim(1)) : 0.0;
}

// out[slot] of an f64 `out`, checked for `op`.
double* f64_slot(const char* op, const Tensor& out, int64_t slot) {
  LATTICE_CHECK(out.defined(), "{}: `out` is undefined", op);
  LATTICE_CHECK(out.dtype() == DType::kF64, "{}: `out` must be f64, got {}", op, out.describe());
  LATTICE_CHECK(slot >= 0 && slot < out.numel(), "{}: slot {} outside {}", op, slot, out.describe());
  return out.f64() + slot;
}

// A tensor as a typed kernel's operand (kernels/typed_kernels.h); undefined: null data.
DataIn data_in(const Tensor& t) {
  return t.defined() ? DataIn{t.raw(), t.dtype() == DType::kBF16} : DataIn{nullptr, false};
}
DataOut data_out(const Tensor& t) {
  return t.defined() ? DataOut{t.raw(), t.dtype() == DType::kBF16} : DataOut{nullptr, false};
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.bytes() == 0 || b.bytes() == 0) return false;
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

}  // namespace

// ---- elementwise and reductions ----

void fill(Tensor& x, float value) {
  const OpScope timed("fill", {&x});
  const Backend& be = backend_for("fill", {&x});
  need_data("fill", "x", x);
  if (be.typed != nullptr) return be.typed->fill(data_out(x), x.numel(), value);
  F32Staging f32(be);
  be.fill(f32.out(x), x.numel(), value);
  f32.finish();
}

void copy(const Tensor& src, Tensor& dst) {
  const OpScope timed("copy", {&src, &dst});
  LATTICE_CHECK(src.defined() && dst.defined(), "copy: undefined tensor (src {}, dst {})", src.defined(),
                dst.defined());
  LATTICE_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
                "copy: src {} and dst {} differ in dtype or element count", src.describe(), dst.describe());
  const auto bytes = static_cast<int64_t>(src.bytes());
  // Between the host and a device: the device's explicit copies (they return once the destination
  // holds the data), so checkpoint snapshots, loads and export gathers work on any device.
  if (src.device() != dst.device() && src.device() == Device::kCpu) {
    backend_for("copy", dst.device()).copy_from_host(src.raw(), dst.raw(), bytes);
  } else if (src.device() != dst.device() && dst.device() == Device::kCpu) {
    backend_for("copy", src.device()).copy_to_host(src.raw(), dst.raw(), bytes);
  } else {
    backend_for("copy", {&src, &dst}).copy(src.raw(), dst.raw(), bytes);
  }
}

Event copy_to_host_async(const Tensor& src, Tensor& host_dst) {
  LATTICE_CHECK(src.defined() && host_dst.defined() && host_dst.device() == Device::kCpu &&
                    src.dtype() == host_dst.dtype() && src.numel() == host_dst.numel(),
                "copy_to_host_async: src {} and host_dst {} must be of one dtype and size, host_dst on the host",
                src.describe(), host_dst.describe());
  const Backend& be = backend_for("copy_to_host_async", src.device());
  if (src.device() == Device::kCpu || be.copy_to_pinned_async == nullptr) {
    copy(src, host_dst);
    return Event();  // complete
  }
  const auto bytes = static_cast<int64_t>(src.bytes());
  return Event::adopt(src.device(), be.copy_to_pinned_async(src.raw(), host_dst.raw(), bytes));
}

void scale(Tensor& x, float alpha) {
  const OpScope timed("scale", {&x});
  const Backend& be = backend_for("scale", {&x});
  need_data("scale", "x", x);
  if (be.typed != nullptr) return be.typed->scale(data_out(x), x.numel(), alpha);
  F32Staging f32(be);
  be.scale(f32.in_out(x), x.numel(), alpha);
  f32.finish();
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  const OpScope timed("axpy", {&x, &y});
  const Backend& be = backend_for("axpy", {&x, &y});
  need_data("axpy", "x", x);
  need_data("axpy", "y", y);
  LATTICE_CHECK(x.numel() == y.numel(), "axpy: x {} and y {} differ in element count", x.describe(), y.describe());
  if (be.typed != nullptr) return be.typed->axpy(alpha, data_in(x), data_out(y), x.numel());
  F32Staging f32(be);
  be.axpy(alpha, f32.in(x), f32.in_out(y), x.numel());
  f32.finish();
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const OpScope timed("add", {&a, &b, &out});
  const Backend& be = backend_for("add", {&a, &b, &out});
  need_data("add", "a", a);
  need_data("add", "b", b);
  need_data("add", "out", out);
  LATTICE_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: a {}, b {}, out {} differ in element count",
                a.describe(), b.describe(), out.describe());
  if (be.typed != nullptr) return be.typed->add(data_in(a), data_in(b), data_out(out), a.numel());
  F32Staging f32(be);
  be.add(f32.in(a), f32.in(b), f32.out(out), a.numel());
  f32.finish();
}

void cast(const Tensor& src, Tensor& dst) {
  const OpScope timed("cast", {&src, &dst});
  const Backend& be = backend_for("cast", {&src, &dst});
  LATTICE_CHECK(src.defined() && dst.defined(), "cast: undefined tensor (src {}, dst {})", src.defined(),
                dst.defined());
  LATTICE_CHECK(src.numel() == dst.numel(), "cast: src {} and dst {} differ in element count", src.describe(),
                dst.describe());
  if (src.dtype() == dst.dtype()) {
    be.copy(src.raw(), dst.raw(), static_cast<int64_t>(src.bytes()));
  } else if (src.dtype() == DType::kF32 && dst.dtype() == DType::kBF16) {
    be.f32_to_bf16(src.f32(), dst.bf16(), src.numel());
  } else if (src.dtype() == DType::kBF16 && dst.dtype() == DType::kF32) {
    be.bf16_to_f32(src.bf16(), dst.f32(), src.numel());
  } else {
    throw Error(fmt::format("cast: no conversion from {} to {} (f32 <-> bf16, or equal dtypes)", src.describe(),
                            dst.describe()));
  }
}

double sum_squares(const Tensor& x) {
  const OpScope timed("sum_squares", {&x});
  const Backend& be = backend_for("sum_squares", {&x});
  need_data("sum_squares", "x", x);
  F32Staging f32(be);
  return be.sum_squares(f32.in(x), x.numel());
}

void sum_to(const Tensor& x, Tensor& out, int64_t slot) {
  const OpScope timed("sum_to", {&x, &out});
  const Backend& be = backend_for("sum_to", {&x, &out});
  need_data("sum_to", "x", x);
  double* sum = f64_slot("sum_to", out, slot);
  F32Staging f32(be);
  be.sum_to(f32.in(x), x.numel(), sum);
}

void sum_squares_to(const Tensor& x, Tensor& out, int64_t slot) {
  const OpScope timed("sum_squares_to", {&x, &out});
  const Backend& be = backend_for("sum_squares_to", {&x, &out});
  need_data("sum_squares_to", "x", x);
  double* sum = f64_slot("sum_squares_to", out, slot);
  F32Staging f32(be);
  be.sum_squares_to(f32.in(x), x.numel(), sum);
}

// ---- matrix multiply ----

namespace {
// matmul's operands, checked for `op`, as the GEMM sees them: c[m, n] = op(a)[m, k] op(b)[k, n].
struct GemmShape {
  int64_t m, n, k, a_cols, b_cols;
};
GemmShape gemm_shape(const char* op, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c) {
  need_data(op, "a", a);
  need_data(op, "b", b);
  need_data(op, "c", c);
  LATTICE_CHECK(a.rank() >= 2 && b.rank() >= 2 && c.rank() >= 2, "{}: a {}, b {}, c {} must have rank >= 2", op,
                a.describe(), b.describe(), c.describe());
  const int64_t a_rows = flat_rows(a), a_cols = last_dim(a);
  const int64_t b_rows = flat_rows(b), b_cols = last_dim(b);
  const int64_t m = trans_a ? a_cols : a_rows, k = trans_a ? a_rows : a_cols;
  const int64_t kb = trans_b ? b_cols : b_rows, n = trans_b ? b_rows : b_cols;
  LATTICE_CHECK(k == kb, "{}: inner dims differ: op(a) is [{}, {}] (a {}{}), op(b) is [{}, {}] (b {}{})", op, m, k,
                a.describe(), trans_a ? ", transposed" : "", kb, n, b.describe(), trans_b ? ", transposed" : "");
  LATTICE_CHECK(last_dim(c) == n && flat_rows(c) == m, "{}: c is {}, expected [{}, {}] for a {}{} and b {}{}", op,
                c.describe(), m, n, a.describe(), trans_a ? "^T" : "", b.describe(), trans_b ? "^T" : "");
  LATTICE_CHECK(!overlaps(c, a) && !overlaps(c, b), "{}: output c {} overlaps an input", op, c.describe());
  return {m, n, k, a_cols, b_cols};
}
}  // namespace

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta) {
  const OpScope timed("matmul", {&a, &b, &c}, {.flops = gemm_flops(a, c)});
  const Backend& be = backend_for("matmul", {&a, &b, &c});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape("matmul", a, trans_a, b, trans_b, c);
  if (m == 0 || n == 0) return;
  // bf16 a and b on a backend with a bf16 GEMM (CUDA: the tensor cores): no staging, c bf16 or f32
  // as it is. k = 0 is a fill or scale of c (below).
  if (a.dtype() == DType::kBF16 && b.dtype() == DType::kBF16 && be.gemm_bf16 != nullptr && k > 0) {
    be.gemm_bf16(trans_a, trans_b, m, n, k, alpha, a.bf16(), a_cols, b.bf16(), b_cols, beta, c.raw(),
                 c.dtype() == DType::kBF16, n);
    return;
  }
  if (k == 0) {  // empty product: c = beta * c (BLAS rejects lda = 0)
    if (beta == 0.0f) {
      fill(c, 0.0f);
    } else {
      scale(c, beta);
    }
    return;
  }
  // Otherwise: widen bf16 operands, sgemm, round c (the CPU has no gemm_bf16: cpu_backend.cc).
  F32Staging f32(be);
  float* out = beta == 0.0f ? f32.out(c) : f32.in_out(c);  // beta = 0 never reads c
  be.sgemm(trans_a, trans_b, m, n, k, alpha, f32.in(a), a_cols, f32.in(b), b_cols, beta, out, n);
  f32.finish();
}

void matmul_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, Tensor& c) {
  const char* op = "matmul_bias";
  const OpScope timed(op, {&a, &b, &bias, &c}, {.flops = gemm_flops(a, c)});
  const Backend& be = backend_for(op, {&a, &b, &bias, &c});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape(op, a, trans_a, b, trans_b, c);
  need_data(op, "bias", bias);
  need_numel(op, "bias", bias, n, fmt::format("last dim of c {}", c.describe()).c_str());
  LATTICE_CHECK(!overlaps(c, bias), "{}: output c {} overlaps bias {}", op, c.describe(), bias.describe());
  if (m == 0 || n == 0) return;
  if (be.gemm_bias != nullptr && k > 0 && a.dtype() == b.dtype() && bias.dtype() == c.dtype() &&
      be.gemm_bias(trans_a, trans_b, m, n, k, a.raw(), a_cols, b.raw(), b_cols, a.dtype() == DType::kBF16,
                   bias.raw(), c.raw(), c.dtype() == DType::kBF16, n)) {
    return;
  }
  // No fused GEMM (the CPU), or one that declined: the two ops, so the CPU's results are those of the
  // code before matmul_bias existed (a bf16 c rounded after the product and again after the bias).
  matmul(a, trans_a, b, trans_b, c);
  add_bias(c, bias);
}

namespace {
// The unfused product of the GEMMs with more: matmul_bias where there is a bias, else matmul.
void matmul_bias_if_any(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, Tensor& c) {
  if (bias.defined()) {
    matmul_bias(a, trans_a, b, trans_b, bias, c);
  } else {
    matmul(a, trans_a, b, trans_b, c);
  }
}
}  // namespace

void matmul_residual(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                     const Tensor& residual, Tensor& c) {
  const char* op = "matmul_residual";
  const OpScope timed(op, {&a, &b, &bias, &residual, &c}, {.flops = gemm_flops(a, c)});
  const Backend& be = backend_for(op, {&a, &b, &bias, &residual, &c});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape(op, a, trans_a, b, trans_b, c);
  need_data(op, "residual", residual);
  need_numel(op, "residual", residual, c.numel(), fmt::format("c {}", c.describe()).c_str());
  LATTICE_CHECK(!overlaps(c, residual), "{}: output c {} overlaps residual {}", op, c.describe(), residual.describe());
  if (bias.defined()) {
    need_data(op, "bias", bias);
    need_numel(op, "bias", bias, n, fmt::format("last dim of c {}", c.describe()).c_str());
    LATTICE_CHECK(!overlaps(c, bias), "{}: output c {} overlaps bias {}", op, c.describe(), bias.describe());
  }
  if (m == 0 || n == 0) return;
  if (be.gemm_residual != nullptr && k > 0 && a.dtype() == b.dtype() && residual.dtype() == c.dtype() &&
      (!bias.defined() || bias.dtype() == c.dtype()) &&
      be.gemm_residual(trans_a, trans_b, m, n, k, a.raw(), a_cols, b.raw(), b_cols, a.dtype() == DType::kBF16,
                       bias.defined() ? bias.raw() : nullptr, residual.raw(), c.raw(), c.dtype() == DType::kBF16, n)) {
    return;
  }
  matmul_bias_if_any(a, trans_a, b, trans_b, bias, c);
  add(c, residual, c);
}

void matmul_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, Tensor& pre,
                      Tensor& out) {
  const char* op = "matmul_bias_gelu";
  const OpScope timed(op, {&a, &b, &bias, &pre, &out}, {.flops = gemm_flops(a, pre)});
  const Backend& be = backend_for(op, {&a, &b, &bias, &pre, &out});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape(op, a, trans_a, b, trans_b, pre);
  need_data(op, "out", out);
  LATTICE_CHECK(out.dtype() == pre.dtype() && out.numel() == pre.numel(), "{}: out {} must match pre {}", op,
                out.describe(), pre.describe());
  LATTICE_CHECK(!overlaps(out, a) && !overlaps(out, b) && !overlaps(out, pre), "{}: output out {} overlaps an input",
                op, out.describe());
  if (bias.defined()) {
    need_data(op, "bias", bias);
    need_numel(op, "bias", bias, n, fmt::format("last dim of pre {}", pre.describe()).c_str());
    LATTICE_CHECK(!overlaps(pre, bias) && !overlaps(out, bias), "{}: an output overlaps bias {}", op, bias.describe());
  }
  if (m == 0 || n == 0) return;
  if (be.gemm_gelu != nullptr && k > 0 && a.dtype() == b.dtype() && (!bias.defined() || bias.dtype() == pre.dtype()) &&
      be.gemm_gelu(trans_a, trans_b, m, n, k, a.raw(), a_cols, b.raw(), b_cols, a.dtype() == DType::kBF16,
                   bias.defined() ? bias.raw() : nullptr, pre.raw(), out.raw(), pre.dtype() == DType::kBF16, n)) {
    return;
  }
  matmul_bias_if_any(a, trans_a, b, trans_b, bias, pre);
  gelu_forward(pre, out);
}

void matmul_gelu_backward(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& pre, Tensor& dx) {
  const char* op = "matmul_gelu_backward";
  const OpScope timed(op, {&a, &b, &pre, &dx}, {.flops = gemm_flops(a, dx)});
  const Backend& be = backend_for(op, {&a, &b, &pre, &dx});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape(op, a, trans_a, b, trans_b, dx);
  need_data(op, "pre", pre);
  LATTICE_CHECK(pre.dtype() == dx.dtype() && pre.numel() == dx.numel(), "{}: pre {} must match dx {}", op,
                pre.describe(), dx.describe());
  LATTICE_CHECK(!overlaps(dx, pre), "{}: output dx {} overlaps pre {}", op, dx.describe(), pre.describe());
  if (m == 0 || n == 0) return;
  if (be.gemm_dgelu != nullptr && k > 0 && a.dtype() == b.dtype() &&
      be.gemm_dgelu(trans_a, trans_b, m, n, k, a.raw(), a_cols, b.raw(), b_cols, a.dtype() == DType::kBF16, pre.raw(),
                    dx.raw(), dx.dtype() == DType::kBF16, n)) {
    return;
  }
  matmul(a, trans_a, b, trans_b, dx);
  gelu_backward(dx, pre, dx);
}

void linear_weight_grad(const Tensor& dy, const Tensor& x, Tensor& dweight, Tensor& dbias) {
  const char* op = "linear_weight_grad";
  const OpScope timed(op, {&dy, &x, &dweight, &dbias}, {.flops = gemm_flops(dy, dweight)});
  const Backend& be = backend_for(op, {&dy, &x, &dweight, &dbias});
  const auto [m, n, k, a_cols, b_cols] = gemm_shape(op, dy, true, x, false, dweight);
  need_data(op, "dbias", dbias);
  need_numel(op, "dbias", dbias, m, fmt::format("last dim of dy {}", dy.describe()).c_str());
  LATTICE_CHECK(!overlaps(dbias, dy) && !overlaps(dbias, x) && !overlaps(dbias, dweight),
                "{}: dbias {} overlaps dy, x or dweight", op, dbias.describe());
  if (be.gemm_bias_grad != nullptr && k > 0 && dy.dtype() == x.dtype() && dweight.dtype() == DType::kF32 &&
      dbias.dtype() == DType::kF32 &&
      be.gemm_bias_grad(m, n, k, dy.raw(), a_cols, x.raw(), b_cols, dy.dtype() == DType::kBF16, dweight.f32(),
                        dbias.f32())) {
    return;
  }
  matmul(dy, true, x, false, dweight, 1.0f, 1.0f);
  bias_backward(dy, dbias);
}

namespace {
// The element stride at which the tensors of `t` lie in memory (0 for a single tensor), when they
// share a dtype and each begins that many elements after the one before; none otherwise.
std::optional<int64_t> uniform_stride(std::span<const Tensor> t) {
  if (t.size() == 1) return 0;
  const auto address = [&](size_t i) { return reinterpret_cast<intptr_t>(t[i].raw()); };
  const intptr_t step = address(1) - address(0);
  const auto element = static_cast<intptr_t>(dtype_size(t[0].dtype()));
  if (step <= 0 || step % element != 0) return std::nullopt;
  for (size_t i = 1; i < t.size(); ++i) {
    if (t[i].dtype() != t[0].dtype() || address(i) - address(0) != static_cast<intptr_t>(i) * step) return std::nullopt;
  }
  return static_cast<int64_t>(step / element);
}
}  // namespace

void matmul_group(std::span<const Tensor> a, bool trans_a, std::span<const Tensor> b, bool trans_b,
                  std::span<const Tensor> bias, std::span<Tensor> c, float alpha, float beta) {
  const char* op = "matmul_group";
  const size_t count = c.size();
  LATTICE_CHECK(count > 0, "{}: no products (c is empty)", op);
  LATTICE_CHECK((a.size() == 1 || a.size() == count) && (b.size() == 1 || b.size() == count) &&
                    (bias.empty() || bias.size() == count),
                "{}: {} products take 1 or {} tensors of a and of b and 0 or {} biases; got {}, {} and {}", op, count,
                count, count, a.size(), b.size(), bias.size());
  LATTICE_CHECK(bias.empty() || (alpha == 1.0f && beta == 0.0f), "{}: with biases alpha must be 1 and beta 0", op);
  const auto nth = [](std::span<const Tensor> t, size_t i) -> const Tensor& { return t[t.size() == 1 ? 0 : i]; };
  const OpScope timed(op, {&a[0], &b[0], bias.empty() ? nullptr : &bias[0], &c[0]},
                      {.products = static_cast<int64_t>(count),
                       .flops = static_cast<double>(count) * gemm_flops(a[0], c[0])});
  const Backend& be = backend_for(op, {&a[0], &b[0], &c[0]});
  GemmShape shape{};  // product 0's, which every product must have
  for (size_t i = 0; i < count; ++i) {
    LATTICE_CHECK(&backend_for(op, {&nth(a, i), &nth(b, i), bias.empty() ? nullptr : &bias[i], &c[i]}) == &be,
                  "{}: product {} is on another device than product 0", op, i);
    const GemmShape s = gemm_shape(op, nth(a, i), trans_a, nth(b, i), trans_b, c[i]);
    if (i == 0) shape = s;
    LATTICE_CHECK(s.m == shape.m && s.n == shape.n && s.k == shape.k,
                  "{}: product {} is [{}, {}] x [{}, {}], product 0 [{}, {}] x [{}, {}]: the shapes must match", op, i,
                  s.m, s.k, s.k, s.n, shape.m, shape.k, shape.k, shape.n);
    if (!bias.empty()) {
      need_data(op, "bias", bias[i]);
      need_numel(op, "bias", bias[i], shape.n, fmt::format("last dim of c {}", c[i].describe()).c_str());
    }
    // Run one by one, a product must not change what a later one reads.
    for (size_t j = 0; j < count; ++j) {
      LATTICE_CHECK(!overlaps(c[i], nth(a, j)) && !overlaps(c[i], nth(b, j)) &&
                        (bias.empty() || !overlaps(c[i], bias[j])) && (i == j || !overlaps(c[i], c[j])),
                    "{}: output c[{}] {} overlaps an input or another output", op, i, c[i].describe());
    }
  }
  if (shape.m == 0 || shape.n == 0) return;
  const std::span<const Tensor> outputs(c.data(), c.size());
  const std::optional<int64_t> stride_a = uniform_stride(a), stride_b = uniform_stride(b);
  const std::optional<int64_t> stride_c = uniform_stride(outputs);
  const std::optional<int64_t> stride_bias = bias.empty() ? std::optional<int64_t>{0} : uniform_stride(bias);
  const bool ab_bf16 = a[0].dtype() == DType::kBF16, c_bf16 = c[0].dtype() == DType::kBF16;
  const bool dtypes_taken = a[0].dtype() == b[0].dtype() && (ab_bf16 || !c_bf16) &&
                            (bias.empty() || bias[0].dtype() == c[0].dtype());
  if (count > 1 && be.gemm_batched != nullptr && shape.k > 0 && dtypes_taken && stride_a && stride_b && stride_c &&
      stride_bias &&
      be.gemm_batched(trans_a, trans_b, shape.m, shape.n, shape.k, alpha, a[0].raw(), shape.a_cols, *stride_a,
                      b[0].raw(), shape.b_cols, *stride_b, ab_bf16, bias.empty() ? nullptr : bias[0].raw(),
                      *stride_bias, beta, c[0].raw(), c_bf16, shape.n, *stride_c, static_cast<int64_t>(count))) {
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    if (bias.empty()) {
      matmul(nth(a, i), trans_a, nth(b, i), trans_b, c[i], alpha, beta);
    } else {
      matmul_bias(nth(a, i), trans_a, nth(b, i), trans_b, bias[i], c[i]);
    }
  }
}

void add_bias(Tensor& y, const Tensor& bias) {
  const OpScope timed("add_bias", {&y, &bias});
  const Backend& be = backend_for("add_bias", {&y, &bias});
  need_data("add_bias", "y", y);
  need_data("add_bias", "bias", bias);
  need_numel("add_bias", "bias", bias, last_dim(y), fmt::format("last dim of y {}", y.describe()).c_str());
  if (be.typed != nullptr) return be.typed->add_bias(data_out(y), data_in(bias), flat_rows(y), last_dim(y));
  F32Staging f32(be);
  be.add_bias(f32.in_out(y), f32.in(bias), flat_rows(y), last_dim(y));
  f32.finish();
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  const OpScope timed("bias_backward", {&dy, &dbias});
  const Backend& be = backend_for("bias_backward", {&dy, &dbias});
  need_data("bias_backward", "dy", dy);
  need_data("bias_backward", "dbias", dbias);
  need_numel("bias_backward", "dbias", dbias, last_dim(dy), fmt::format("last dim of dy {}", dy.describe()).c_str());
  if (be.typed != nullptr) return be.typed->bias_backward(data_in(dy), data_out(dbias), flat_rows(dy), last_dim(dy));
  F32Staging f32(be);
  be.bias_backward(f32.in(dy), f32.in_out(dbias), flat_rows(dy), last_dim(dy));
  f32.finish();
}

void bias_backward_group(std::span<const Tensor> dys, std::span<Tensor> dbiases) {
  const char* op = "bias_backward_group";
  LATTICE_CHECK(!dys.empty() && dys.size() == dbiases.size(),
                "{}: {} dy and {} dbias tensors; need one of each per product", op, dys.size(), dbiases.size());
  const OpScope timed(op, {&dys[0], &dbiases[0]}, {.products = static_cast<int64_t>(dys.size())});
  const Backend& be = backend_for(op, {&dys[0], &dbiases[0]});
  bool one_shape = true;
  for (size_t i = 0; i < dys.size(); ++i) {
    LATTICE_CHECK(&backend_for(op, {&dys[i], &dbiases[i]}) == &be, "{}: product {} is on another device than product 0",
                  op, i);
    need_data(op, "dy", dys[i]);
    need_data(op, "dbias", dbiases[i]);
    need_numel(op, "dbias", dbiases[i], last_dim(dys[i]), fmt::format("last dim of dy {}", dys[i].describe()).c_str());
    // Run one by one, a product must not change what a later one reads.
    for (size_t j = 0; j < dys.size(); ++j) {
      LATTICE_CHECK(!overlaps(dbiases[i], dys[j]) && (i == j || !overlaps(dbiases[i], dbiases[j])),
                    "{}: dbias[{}] {} overlaps a dy or another dbias", op, i, dbiases[i].describe());
    }
    one_shape = one_shape && flat_rows(dys[i]) == flat_rows(dys[0]) && last_dim(dys[i]) == last_dim(dys[0]);
  }
  if (be.typed != nullptr && be.typed->bias_backward_group != nullptr && one_shape) {
    std::vector<DataIn> in;
    std::vector<DataOut> out;
    for (size_t i = 0; i < dys.size(); ++i) {
      in.push_back(data_in(dys[i]));
      out.push_back(data_out(dbiases[i]));
    }
    return be.typed->bias_backward_group(in.data(), out.data(), static_cast<int>(in.size()), flat_rows(dys[0]),
                                         last_dim(dys[0]));
  }
  for (size_t i = 0; i < dys.size(); ++i) bias_backward(dys[i], dbiases[i]);
}

// ---- embeddings ----

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out, Ids ids_check) {
  const char* op = "embedding_forward";
  const OpScope timed(op, {&ids, &table, &out}, {.bytes = gather_bytes(ids, table, out, 1)});
  const Backend& be = backend_for(op, {&ids, &table, &out});
  need_i32(op, "ids", ids);
  need_data(op, "table", table);
  need_data(op, "out", out);
  LATTICE_CHECK(table.rank() == 2, "{}: table {} must be [V, H]", op, table.describe());
  const int64_t n = ids.numel(), v = table.dim(0), h = table.dim(1);
  LATTICE_CHECK(last_dim(out) == h && out.numel() == n * h, "{}: out {} must be [{}, {}] for ids {} and table {}",
                op, out.describe(), n, h, ids.describe(), table.describe());
  if (ids_check == Ids::kCheck) be.check_indices(op, "token id", ids.i32(), n, v);
  if (be.typed != nullptr) {
    return be.typed->embedding_forward_shard(ids.i32(), data_in(table), data_out(out), n, h, 0, v);
  }
  F32Staging f32(be);
  be.embedding_forward(ids.i32(), f32.in(table), f32.out(out), n, h);
  f32.finish();
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable, Ids ids_check) {
  const char* op = "embedding_backward";
  const OpScope timed(op, {&ids, &dout, &dtable}, {.bytes = gather_bytes(ids, dtable, dout, 2)});
  const Backend& be = backend_for(op, {&ids, &dout, &dtable});
  need_i32(op, "ids", ids);
  need_data(op, "dout", dout);
  need_data(op, "dtable", dtable);
  LATTICE_CHECK(dtable.rank() == 2, "{}: dtable {} must be [V, H]", op, dtable.describe());
  const int64_t n = ids.numel(), v = dtable.dim(0), h = dtable.dim(1);
  LATTICE_CHECK(last_dim(dout) == h && dout.numel() == n * h, "{}: dout {} must be [{}, {}] for ids {} and dtable {}",
                op, dout.describe(), n, h, ids.describe(), dtable.describe());
  if (ids_check == Ids::kCheck) be.check_indices(op, "token id", ids.i32(), n, v);
  F32Staging f32(be);
  if (be.typed != nullptr) {
    be.typed->embedding_backward_shard(ids.i32(), data_in(dout), f32.in_out(dtable), n, h, 0, v);
  } else {
    be.embedding_backward(ids.i32(), f32.in(dout), f32.in_out(dtable), n, h);
  }
  f32.finish();
}

void add_position_embedding(Tensor& x, const Tensor& table) {
  const char* op = "add_position_embedding";
  const OpScope timed(op, {&x, &table});
  const Backend& be = backend_for(op, {&x, &table});
  need_data(op, "x", x);
  need_data(op, "table", table);
  LATTICE_CHECK(x.rank() == 3 && table.rank() == 2 && table.dim(1) == x.dim(2) && table.dim(0) >= x.dim(1),
                "{}: x {} must be [B, T, H] and table {} [P >= T, H]", op, x.describe(), table.describe());
  if (be.typed != nullptr) {
    return be.typed->add_position_embedding_tokens(data_out(x), data_in(table), x.dim(0) * x.dim(1), x.dim(2),
                                                   x.dim(1), 0);
  }
  F32Staging f32(be);
  be.add_position_embedding(f32.in_out(x), f32.in(table), x.dim(0), x.dim(1), x.dim(2));
  f32.finish();
}

void position_embedding_backward(const Tensor& dx, Tensor& dtable) {
  const char* op = "position_embedding_backward";
  const OpScope timed(op, {&dx, &dtable});
  const Backend& be = backend_for(op, {&dx, &dtable});
  need_data(op, "dx", dx);
  need_data(op, "dtable", dtable);
  LATTICE_CHECK(dx.rank() == 3 && dtable.rank() == 2 && dtable.dim(1) == dx.dim(2) && dtable.dim(0) >= dx.dim(1),
                "{}: dx {} must be [B, T, H] and dtable {} [P >= T, H]", op, dx.describe(), dtable.describe());
  if (be.typed != nullptr) {
    return be.typed->position_embedding_backward_tokens(data_in(dx), data_out(dtable), dx.dim(0) * dx.dim(1),
                                                        dx.dim(2), dx.dim(1), 0);
  }
  F32Staging f32(be);
  be.position_embedding_backward(f32.in(dx), f32.in_out(dtable), dx.dim(0), dx.dim(1), dx.dim(2));
  f32.finish();
}

void embedding_forward_shard(const Tensor& ids, const Tensor& table, int64_t first_row, int64_t vocab_size,
                             Tensor& out, Ids ids_check) {
  const char* op = "embedding_forward_shard";
  const OpScope timed(op, {&ids, &table, &out}, {.bytes = gather_bytes(ids, table, out, 1)});
  const Backend& be = backend_for(op, {&ids, &table, &out});
  need_i32(op, "ids", ids);
  need_data(op, "table", table);
  need_data(op, "out", out);
  LATTICE_CHECK(table.rank() == 2, "{}: table {} must be [rows, H]", op, table.describe());
  LATTICE_CHECK(first_row >= 0, "{}: first_row {} is negative", op, first_row);
  const int64_t n = ids.numel(), h = table.dim(1);
  LATTICE_CHECK(last_dim(out) == h && out.numel() == n * h, "{}: out {} must be [{}, {}] for ids {} and table {}",
                op, out.describe(), n, h, ids.describe(), table.describe());
  if (ids_check == Ids::kCheck) be.check_indices(op, "token id", ids.i32(), n, vocab_size);
  if (be.typed != nullptr) {
    return be.typed->embedding_forward_shard(ids.i32(), data_in(table), data_out(out), n, h, first_row,
                                             table.dim(0));
  }
  F32Staging f32(be);
  be.embedding_forward_shard(ids.i32(), f32.in(table), f32.out(out), n, h, first_row, table.dim(0));
  f32.finish();
}

void embedding_backward_shard(const Tensor& ids, const Tensor& dout, int64_t first_row, int64_t vocab_size,
                              Tensor& dtable, Ids ids_check) {
  const char* op = "embedding_backward_shard";
  const OpScope timed(op, {&ids, &dout, &dtable}, {.bytes = gather_bytes(ids, dtable, dout, 2)});
  const Backend& be = backend_for(op, {&ids, &dout, &dtable});
  need_i32(op, "ids", ids);
  need_data(op, "dout", dout);
  need_data(op, "dtable", dtable);
  LATTICE_CHECK(dtable.rank() == 2, "{}: dtable {} must be [rows, H]", op, dtable.describe());
  LATTICE_CHECK(first_row >= 0, "{}: first_row {} is negative", op, first_row);
  const int64_t n = ids.numel(), h = dtable.dim(1);
  LATTICE_CHECK(last_dim(dout) == h && dout.numel() == n * h, "{}: dout {} must be [{}, {}] for ids {} and dtable {}",
                op, dout.describe(), n, h, ids.describe(), dtable.describe());
  if (ids_check == Ids::kCheck) be.check_indices(op, "token id", ids.i32(), n, vocab_size);
  F32Staging f32(be);
  if (be.typed != nullptr) {
    be.typed->embedding_backward_shard(ids.i32(), data_in(dout), f32.in_out(dtable), n, h, first_row,
                                       dtable.dim(0));
  } else {
    be.embedding_backward_shard(ids.i32(), f32.in(dout), f32.in_out(dtable), n, h, first_row, dtable.dim(0));
  }
  f32.finish();
}

void add_position_embedding(Tensor& x, const Tensor& table, int64_t seq_length, int64_t first_token) {
  const char* op = "add_position_embedding";
  const OpScope timed(op, {&x, &table});
  const Backend& be = backend_for(op, {&x, &table});
  need_data(op, "x", x);
  need_data(op, "table", table);
  LATTICE_CHECK(table.rank() == 2 && last_dim(x) == table.dim(1) && seq_length >= 1 && table.dim(0) >= seq_length &&
                    first_token >= 0,
                "{}: x {} must be [N, H], table {} [P >= T, H] with T = {} >= 1, first token {} >= 0", op,
                x.describe(), table.describe(), seq_length, first_token);
  if (be.typed != nullptr) {
    return be.typed->add_position_embedding_tokens(data_out(x), data_in(table), flat_rows(x), last_dim(x),
                                                   seq_length, first_token);
  }
  F32Staging f32(be);
  be.add_position_embedding_tokens(f32.in_out(x), f32.in(table), flat_rows(x), last_dim(x), seq_length,
                                   first_token);
  f32.finish();
}

void position_embedding_backward(const Tensor& dx, int64_t seq_length, int64_t first_token, Tensor& dtable) {
  const char* op = "position_embedding_backward";
  const OpScope timed(op, {&dx, &dtable});
  const Backend& be = backend_for(op, {&dx, &dtable});
  need_data(op, "dx", dx);
  need_data(op, "dtable", dtable);
  LATTICE_CHECK(dtable.rank() == 2 && last_dim(dx) == dtable.dim(1) && seq_length >= 1 &&
                    dtable.dim(0) >= seq_length && first_token >= 0,
                "{}: dx {} must be [N, H], dtable {} [P >= T, H] with T = {} >= 1, first token {} >= 0", op,
                dx.describe(), dtable.describe(), seq_length, first_token);
  if (be.typed != nullptr) {
    return be.typed->position_embedding_backward_tokens(data_in(dx), data_out(dtable), flat_rows(dx), last_dim(dx),
                                                        seq_length, first_token);
  }
  F32Staging f32(be);
  be.position_embedding_backward_tokens(f32.in(dx), f32.in_out(dtable), flat_rows(dx), last_dim(dx), seq_length,
                                        first_token);
  f32.finish();
}

// ---- normalization ----

namespace {
// A norm backward's optional residual gradient: undefined, or data the size of dx apart from it.
void check_residual_grad(const char* op, const Tensor& residual_grad, const Tensor& dx) {
  if (!residual_grad.defined()) return;
  need_data(op, "residual_grad", residual_grad);
  need_numel(op, "residual_grad", residual_grad, dx.numel(), "same as dx");
  LATTICE_CHECK(!overlaps(residual_grad, dx), "{}: residual_grad {} overlaps dx {}", op, residual_grad.describe(),
                dx.describe());
}
}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                       Tensor& mean, Tensor& rstd) {
  const char* op = "layernorm_forward";
  const OpScope timed(op, {&x, &gamma, &beta, &y, &mean, &rstd});
  const Backend& be = backend_for(op, {&x, &gamma, &beta, &y, &mean, &rstd});
  for (auto [name, t] : {std::pair{"x", &x}, {"gamma", &gamma}, {"y", &y}}) need_data(op, name, *t);
  need_f32(op, "mean", mean);
  need_f32(op, "rstd", rstd);
  const int64_t h = last_dim(x), n = flat_rows(x);
  need_numel(op, "gamma", gamma, h, "H");
  if (beta.defined()) {
    need_data(op, "beta", beta);
    need_numel(op, "beta", beta, h, "H");
  }
  need_numel(op, "y", y, x.numel(), "same as x");
  need_numel(op, "mean", mean, n, "one per row of x");
  need_numel(op, "rstd", rstd, n, "one per row of x");
  if (be.typed != nullptr) {
    return be.typed->layernorm_forward(data_in(x), data_in(gamma), data_in(beta), eps, data_out(y), mean.f32(),
                                       rstd.f32(), n, h);
  }
  F32Staging f32(be);
  be.layernorm_forward(f32.in(x), f32.in(gamma), f32.in(beta), eps, f32.out(y), mean.f32(), rstd.f32(), n, h);
  f32.finish();
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, const Tensor& residual_grad) {
  const char* op = "layernorm_backward";
  const OpScope timed(op, {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta, &residual_grad});
  const Backend& be = backend_for(op, {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta, &residual_grad});
  for (auto [name, t] : {std::pair{"dy", &dy}, {"x", &x}, {"gamma", &gamma}, {"dx", &dx}, {"dgamma", &dgamma}}) {
    need_data(op, name, *t);
  }
  need_f32(op, "mean", mean);
  need_f32(op, "rstd", rstd);
  const int64_t h = last_dim(x), n = flat_rows(x);
  need_numel(op, "dy", dy, x.numel(), "same as x");
  need_numel(op, "dx", dx, x.numel(), "same as x");
  need_numel(op, "gamma", gamma, h, "H");
  need_numel(op, "dgamma", dgamma, h, "H");
  if (dbeta.defined()) {
    need_data(op, "dbeta", dbeta);
    need_numel(op, "dbeta", dbeta, h, "H");
  }
  need_numel(op, "mean", mean, n, "one per row of x");
  need_numel(op, "rstd", rstd, n, "one per row of x");
  check_residual_grad(op, residual_grad, dx);
  if (be.typed != nullptr) {
    return be.typed->layernorm_backward(data_in(dy), data_in(x), data_in(gamma), mean.f32(), rstd.f32(),
                                        data_in(residual_grad), data_out(dx), data_out(dgamma), data_out(dbeta), n, h);
  }
  {
    F32Staging f32(be);
    be.layernorm_backward(f32.in(dy), f32.in(x), f32.in(gamma), mean.f32(), rstd.f32(), f32.out(dx),
                          f32.in_out(dgamma), f32.in_out(dbeta), n, h);
    f32.finish();
  }
  if (residual_grad.defined()) add(dx, residual_grad, dx);
}

void rmsnorm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y, Tensor& rstd) {
  const char* op = "rmsnorm_forward";
  const OpScope timed(op, {&x, &gamma, &y, &rstd});
  const Backend& be = backend_for(op, {&x, &gamma, &y, &rstd});
  for (auto [name, t] : {std::pair{"x", &x}, {"gamma", &gamma}, {"y", &y}}) need_data(op, name, *t);
  need_f32(op, "rstd", rstd);
  const int64_t h = last_dim(x), n = flat_rows(x);
  need_numel(op, "gamma", gamma, h, "H");
  need_numel(op, "y", y, x.numel(), "same as x");
  need_numel(op, "rstd", rstd, n, "one per row of x");
  if (be.typed != nullptr) {
    return be.typed->rmsnorm_forward(data_in(x), data_in(gamma), eps, data_out(y), rstd.f32(), n, h);
  }
  F32Staging f32(be);
  be.rmsnorm_forward(f32.in(x), f32.in(gamma), eps, f32.out(y), rstd.f32(), n, h);
  f32.finish();
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                      Tensor& dgamma, const Tensor& residual_grad) {
  const char* op = "rmsnorm_backward";
  const OpScope timed(op, {&dy, &x, &gamma, &rstd, &dx, &dgamma, &residual_grad});
  const Backend& be = backend_for(op, {&dy, &x, &gamma, &rstd, &dx, &dgamma, &residual_grad});
  for (auto [name, t] : {std::pair{"dy", &dy}, {"x", &x}, {"gamma", &gamma}, {"dx", &dx}, {"dgamma", &dgamma}}) {
    need_data(op, name, *t);
  }
  need_f32(op, "rstd", rstd);
  const int64_t h = last_dim(x), n = flat_rows(x);
  need_numel(op, "dy", dy, x.numel(), "same as x");
  need_numel(op, "dx", dx, x.numel(), "same as x");
  need_numel(op, "gamma", gamma, h, "H");
  need_numel(op, "dgamma", dgamma, h, "H");
  need_numel(op, "rstd", rstd, n, "one per row of x");
  check_residual_grad(op, residual_grad, dx);
  if (be.typed != nullptr) {
    return be.typed->rmsnorm_backward(data_in(dy), data_in(x), data_in(gamma), rstd.f32(), data_in(residual_grad),
                                      data_out(dx), data_out(dgamma), n, h);
  }
  {
    F32Staging f32(be);
    be.rmsnorm_backward(f32.in(dy), f32.in(x), f32.in(gamma), rstd.f32(), f32.out(dx), f32.in_out(dgamma), n, h);
    f32.finish();
  }
  if (residual_grad.defined()) add(dx, residual_grad, dx);
}

// ---- activations ----

void gelu_forward(const Tensor& x, Tensor& y) {
  const OpScope timed("gelu_forward", {&x, &y});
  const Backend& be = backend_for("gelu_forward", {&x, &y});
  need_data("gelu_forward", "x", x);
  need_data("gelu_forward", "y", y);
  need_numel("gelu_forward", "y", y, x.numel(), "same as x");
  if (be.typed != nullptr) return be.typed->gelu_forward(data_in(x), data_out(y), x.numel());
  F32Staging f32(be);
  be.gelu_forward(f32.in(x), f32.out(y), x.numel());
  f32.finish();
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  const char* op = "gelu_backward";
  const OpScope timed(op, {&dy, &x, &dx});
  const Backend& be = backend_for(op, {&dy, &x, &dx});
  for (auto [name, t] : {std::pair{"dy", &dy}, {"x", &x}, {"dx", &dx}}) need_data(op, name, *t);
  need_numel(op, "dy", dy, x.numel(), "same as x");
  need_numel(op, "dx", dx, x.numel(), "same as x");
  if (be.typed != nullptr) return be.typed->gelu_backward(data_in(dy), data_in(x), data_out(dx), x.numel());
  F32Staging f32(be);
  be.gelu_backward(f32.in(dy), f32.in(x), f32.out(dx), x.numel());
  f32.finish();
}

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  const char* op = "swiglu_forward";
  const OpScope timed(op, {&gate, &up, &y});
  const Backend& be = backend_for(op, {&gate, &up, &y});
  for (auto [name, t] : {std::pair{"gate", &gate}, {"up", &up}, {"y", &y}}) need_data(op, name, *t);
  need_numel(op, "up", up, gate.numel(), "same as gate");
  need_numel(op, "y", y, gate.numel(), "same as gate");
  if (be.typed != nullptr) return be.typed->swiglu_forward(data_in(gate), data_in(up), data_out(y), gate.numel());
  F32Staging f32(be);
  be.swiglu_forward(f32.in(gate), f32.in(up), f32.out(y), gate.numel());
  f32.finish();
}

void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const char* op = "swiglu_backward";
  const OpScope timed(op, {&dy, &gate, &up, &dgate, &dup});
  const Backend& be = backend_for(op, {&dy, &gate, &up, &dgate, &dup});
  for (auto [name, t] : {std::pair{"dy", &dy}, {"gate", &gate}, {"up", &up}, {"dgate", &dgate}, {"dup", &dup}}) {
    need_data(op, name, *t);
  }
  for (auto [name, t] : {std::pair{"dy", &dy}, {"up", &up}, {"dgate", &dgate}, {"dup", &dup}}) {
    need_numel(op, name, *t, gate.numel(), "same as gate");
  }
  if (be.typed != nullptr) {
    return be.typed->swiglu_backward(data_in(dy), data_in(gate), data_in(up), data_out(dgate), data_out(dup),
                                     gate.numel());
  }
  F32Staging f32(be);
  be.swiglu_backward(f32.in(dy), f32.in(gate), f32.in(up), f32.out(dgate), f32.out(dup), gate.numel());
  f32.finish();
}

// ---- rotary position embedding ----

namespace {
void rope_dispatch(const char* op, Tensor& x, float theta, bool inverse) {
  const OpScope timed(op, {&x});
  const Backend& be = backend_for(op, {&x});
  need_data(op, "x", x);
  LATTICE_CHECK(x.rank() == 4 && x.dim(3) % 2 == 0, "{}: x {} must be [B, T, heads, D] with D even", op,
                x.describe());
  LATTICE_CHECK(theta > 0.0f, "{}: theta must be positive, got {}", op, theta);
  if (be.typed != nullptr) return be.typed->rope(data_out(x), x.dim(0), x.dim(1), x.dim(2), x.dim(3), theta, inverse);
  F32Staging f32(be);
  be.rope(f32.in_out(x), x.dim(0), x.dim(1), x.dim(2), x.dim(3), theta, inverse);
  f32.finish();
}
}  // namespace

void rope_forward(Tensor& x, float theta) { rope_dispatch("rope_forward", x, theta, false); }
void rope_backward(Tensor& dx, float theta) { rope_dispatch("rope_backward", dx, theta, true); }

// ---- causal self-attention ----

namespace {
bool all_bf16(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->dtype() != DType::kBF16) return false;
  return true;
}

AttentionShape attention_shape(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  need_data(op, "q", q);
  need_data(op, "k", k);
  need_data(op, "v", v);
  LATTICE_CHECK(q.rank() == 4 && k.rank() == 4 && k.shape() == v.shape(),
                "{}: q {} must be [B, T, Hq, D] and k {}, v {} equal [B, T, Hkv, D]", op, q.describe(),
                k.describe(), v.describe());
  LATTICE_CHECK(k.dim(0) == q.dim(0) && k.dim(1) == q.dim(1) && k.dim(3) == q.dim(3) && k.dim(2) > 0 &&
                    q.dim(2) % k.dim(2) == 0,
                "{}: q {} and k/v {} need equal B, T, D and Hq a multiple of Hkv", op, q.describe(), k.describe());
  LATTICE_CHECK(q.dim(3) > 0, "{}: head dim of q {} must be positive", op, q.describe());
  return AttentionShape{q.dim(0), q.dim(1), q.dim(2), k.dim(2), q.dim(3)};
}
}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse) {
  const char* op = "attention_forward";
  const OpScope timed(op, {&q, &k, &v, &out, &lse}, {.flops = attention_forward_flops(q)});
  const Backend& be = backend_for(op, {&q, &k, &v, &out, &lse});
  const AttentionShape s = attention_shape(op, q, k, v);
  need_data(op, "out", out);
  need_f32(op, "lse", lse);
  need_numel(op, "out", out, q.numel(), "same as q");
  need_numel(op, "lse", lse, s.batch * s.q_heads * s.seq, "[B, Hq, T]");
  if (be.attention_forward_bf16 != nullptr && all_bf16({&q, &k, &v, &out}) &&
      be.attention_forward_bf16(q.bf16(), k.bf16(), v.bf16(), out.bf16(), lse.f32(), s))
    return;
  F32Staging f32(be);
  be.attention_forward(f32.in(q), f32.in(k), f32.in(v), f32.out(out), lse.f32(), s);
  f32.finish();
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv) {
  const char* op = "attention_backward";
  const OpScope timed(op, {&dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv}, {.flops = 2.5 * attention_forward_flops(q)});
  const Backend& be = backend_for(op, {&dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv});
  const AttentionShape s = attention_shape(op, q, k, v);
  for (auto [name, t] : {std::pair{"dout", &dout}, {"out", &out}, {"dq", &dq}, {"dk", &dk}, {"dv", &dv}}) {
    need_data(op, name, *t);
  }
  need_f32(op, "lse", lse);
  need_numel(op, "dout", dout, q.numel(), "same as q");
  need_numel(op, "out", out, q.numel(), "same as q");
  need_numel(op, "dq", dq, q.numel(), "same as q");
  need_numel(op, "dk", dk, k.numel(), "same as k");
  need_numel(op, "dv", dv, v.numel(), "same as v");
  need_numel(op, "lse", lse, s.batch * s.q_heads * s.seq, "[B, Hq, T]");
  if (be.attention_backward_bf16 != nullptr && all_bf16({&dout, &q, &k, &v, &out, &dq, &dk, &dv}) &&
      be.attention_backward_bf16(dout.bf16(), q.bf16(), k.bf16(), v.bf16(), out.bf16(), lse.f32(), dq.bf16(),
                                 dk.bf16(), dv.bf16(), s))
    return;
  F32Staging f32(be);
  be.attention_backward(f32.in(dout), f32.in(q), f32.in(k), f32.in(v), f32.in(out), lse.f32(), f32.out(dq),
                        f32.out(dk), f32.out(dv), s);
  f32.finish();
}

// ---- loss ----

namespace {
// The checks the whole-vocabulary loss ops share: logits [N, V] of data, targets i32[N] (in [0, V)
// unless already checked), and each f32 statistic (losses, lse) and dlogits given. Returns the
// backend.
const Backend& check_cross_entropy(const char* op, const Tensor& logits, const Tensor& targets, const Tensor* losses,
                                   const Tensor* lse, const Tensor* dlogits, Ids ids_check) {
  const Backend& be = backend_for(op, {&logits, &targets, losses, lse, dlogits});
  need_data(op, "logits", logits);
  need_i32(op, "targets", targets);
  const int64_t v = last_dim(logits), n = flat_rows(logits);
  LATTICE_CHECK(v > 0, "{}: logits {} has an empty vocab dimension", op, logits.describe());
  need_numel(op, "targets", targets, n, fmt::format("one per row of logits {}", logits.describe()).c_str());
  for (const auto& [name, t] : {std::pair{"losses", losses}, std::pair{"lse", lse}}) {
    if (t == nullptr) continue;
    need_f32(op, name, *t);
    need_numel(op, name, *t, n, "one per row of logits");
  }
  if (dlogits != nullptr) {
    need_data(op, "dlogits", *dlogits);
    need_numel(op, "dlogits", *dlogits, logits.numel(), "same as logits");
    LATTICE_CHECK(last_dim(*dlogits) == v, "{}: dlogits {} must have the vocab dim of logits {}", op,
                  dlogits->describe(), logits.describe());
  }
  if (ids_check == Ids::kCheck) be.check_indices(op, "target", targets.i32(), n, v);
  return be;
}
}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor& lse, Ids ids_check) {
  const char* op = "cross_entropy_forward";
  const OpScope timed(op, {&logits, &targets, &losses, &lse});
  const Backend& be = check_cross_entropy(op, logits, targets, &losses, &lse, nullptr, ids_check);
  const int64_t v = last_dim(logits), n = flat_rows(logits);
  if (be.typed != nullptr) {
    return be.typed->cross_entropy_forward(data_in(logits), targets.i32(), losses.f32(), lse.f32(), n, v);
  }
  F32Staging f32(be);
  be.cross_entropy_forward(f32.in(logits), targets.i32(), losses.f32(), lse.f32(), n, v);
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, float grad_scale,
                            Tensor& dlogits, Ids ids_check) {
  const char* op = "cross_entropy_backward";
  const OpScope timed(op, {&logits, &targets, &lse, &dlogits});
  const Backend& be = check_cross_entropy(op, logits, targets, nullptr, &lse, &dlogits, ids_check);
  const int64_t v = last_dim(logits), n = flat_rows(logits);
  if (be.typed != nullptr) {
    return be.typed->cross_entropy_shard_backward(data_in(logits), targets.i32(), lse.f32(), grad_scale,
                                                  data_out(dlogits), n, v, 0, v);
  }
  F32Staging f32(be);
  be.cross_entropy_backward(f32.in(logits), targets.i32(), lse.f32(), grad_scale, f32.out(dlogits), n, v);
  f32.finish();
}

void cross_entropy_forward_backward(const Tensor& logits, const Tensor& targets, float grad_scale, Tensor& losses,
                                    Tensor& lse, Tensor& dlogits, Ids ids_check) {
  const char* op = "cross_entropy_forward_backward";
  const OpScope timed(op, {&logits, &targets, &losses, &lse, &dlogits});
  const Backend& be = check_cross_entropy(op, logits, targets, &losses, &lse, &dlogits, ids_check);
  if (be.typed != nullptr && be.typed->cross_entropy_forward_backward != nullptr) {
    return be.typed->cross_entropy_forward_backward(data_in(logits), targets.i32(), grad_scale, losses.f32(),
                                                    lse.f32(), data_out(dlogits), flat_rows(logits),
                                                    last_dim(logits));
  }
  cross_entropy_forward(logits, targets, losses, lse, Ids::kChecked);
  cross_entropy_backward(logits, targets, lse, grad_scale, dlogits, Ids::kChecked);
}

// ---- vocab-parallel loss ----

namespace {
// Shared shape checks of the shard ops: logits [N, Vl] with 0 <= valid_cols <= Vl.
void check_shard(const char* op, const Tensor& logits, int64_t first_col, int64_t valid_cols) {
  need_data(op, "logits", logits);
  LATTICE_CHECK(logits.rank() >= 2, "{}: logits {} must be [N, Vl]", op, logits.describe());
  LATTICE_CHECK(valid_cols >= 0 && valid_cols <= last_dim(logits) && first_col >= 0,
                "{}: {} valid columns at column {} do not fit logits {}", op, valid_cols, first_col, logits.describe());
}
}  // namespace

void cross_entropy_shard_max(const Tensor& logits, int64_t valid_cols, Tensor& row_max) {
  const char* op = "cross_entropy_shard_max";
  const OpScope timed(op, {&logits, &row_max});
  const Backend& be = backend_for(op, {&logits, &row_max});
  check_shard(op, logits, 0, valid_cols);
  need_f32(op, "row_max", row_max);
  const int64_t n = flat_rows(logits);
  need_numel(op, "row_max", row_max, n, "one per row of logits");
  if (be.typed != nullptr) {
    return be.typed->cross_entropy_shard_max(data_in(logits), row_max.f32(), n, last_dim(logits), valid_cols);
  }
  F32Staging f32(be);
  be.cross_entropy_shard_max(f32.in(logits), row_max.f32(), n, last_dim(logits), valid_cols);
}

void cross_entropy_shard_sums(const Tensor& logits, const Tensor& targets, const Tensor& row_max, int64_t first_col,
                              int64_t valid_cols, int64_t vocab_size, Tensor& sums, Ids ids_check) {
  const char* op = "cross_entropy_shard_sums";
  const OpScope timed(op, {&logits, &targets, &row_max, &sums});
  const Backend& be = backend_for(op, {&logits, &targets, &row_max, &sums});
  check_shard(op, logits, first_col, valid_cols);
  need_i32(op, "targets", targets);
  need_f32(op, "row_max", row_max);
  need_f32(op, "sums", sums);
  const int64_t n = flat_rows(logits);
  need_numel(op, "targets", targets, n, fmt::format("one per row of logits {}", logits.describe()).c_str());
  need_numel(op, "row_max", row_max, n, "one per row of logits");
  need_numel(op, "sums", sums, 2 * n, "[2, N]: sum of exponentials and target logit per row");
  if (ids_check == Ids::kCheck) be.check_indices(op, "target", targets.i32(), n, vocab_size);
  if (be.typed != nullptr) {
    return be.typed->cross_entropy_shard_sums(data_in(logits), targets.i32(), row_max.f32(), sums.f32(),
                                              sums.f32() + n, n, last_dim(logits), first_col, valid_cols);
  }
  F32Staging f32(be);
  be.cross_entropy_shard_sums(f32.in(logits), targets.i32(), row_max.f32(), sums.f32(), sums.f32() + n, n,
                              last_dim(logits), first_col, valid_cols);
}

void cross_entropy_shard_loss(const Tensor& row_max, const Tensor& sums, Tensor& losses, Tensor& lse) {
  const char* op = "cross_entropy_shard_loss";
  const OpScope timed(op, {&row_max, &sums, &losses, &lse});
  const Backend& be = backend_for(op, {&row_max, &sums, &losses, &lse});
  for (auto [name, t] : {std::pair{"row_max", &row_max}, {"sums", &sums}, {"losses", &losses}, {"lse", &lse}}) {
    need_f32(op, name, *t);
  }
  const int64_t n = row_max.numel();
  need_numel(op, "sums", sums, 2 * n, "[2, N]");
  need_numel(op, "losses", losses, n, "one per row");
  need_numel(op, "lse", lse, n, "one per row");
  be.cross_entropy_shard_loss(row_max.f32(), sums.f32(), sums.f32() + n, losses.f32(), lse.f32(), n);
}

void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, float grad_scale,
                                  int64_t first_col, int64_t valid_cols, int64_t vocab_size, Tensor& dlogits,
                                  Ids ids_check) {
  const char* op = "cross_entropy_shard_backward";
  const OpScope timed(op, {&logits, &targets, &lse, &dlogits});
  const Backend& be = backend_for(op, {&logits, &targets, &lse, &dlogits});
  check_shard(op, logits, first_col, valid_cols);
  need_i32(op, "targets", targets);
  need_f32(op, "lse", lse);
  need_data(op, "dlogits", dlogits);
  const int64_t n = flat_rows(logits), v = last_dim(logits);
  need_numel(op, "targets", targets, n, fmt::format("one per row of logits {}", logits.describe()).c_str());
  need_numel(op, "lse", lse, n, "one per row of logits");
  need_numel(op, "dlogits", dlogits, logits.numel(), "same as logits");
  LATTICE_CHECK(last_dim(dlogits) == v, "{}: dlogits {} must have the vocab dim of logits {}", op,
                dlogits.describe(), logits.describe());
  if (ids_check == Ids::kCheck) be.check_indices(op, "target", targets.i32(), n, vocab_size);
  if (be.typed != nullptr) {
    return be.typed->cross_entropy_shard_backward(data_in(logits), targets.i32(), lse.f32(), grad_scale,
                                                  data_out(dlogits), n, v, first_col, valid_cols);
  }
  F32Staging f32(be);
  be.cross_entropy_shard_backward(f32.in(logits), targets.i32(), lse.f32(), grad_scale, f32.out(dlogits), n, v,
                                  first_col, valid_cols);
  f32.finish();
}

// ---- initialization ----

void fill_normal(Tensor& x, const Shape& global_shape, const Shape& box_offset, uint64_t seed, uint64_t stream,
                 float std) {
  const char* op = "fill_normal";
  const OpScope timed(op, {&x});
  const Backend& be = backend_for(op, {&x});
  need_f32(op, "x", x);
  const Shape& box = x.shape();
  bool ok = global_shape.size() == box.size() && box_offset.size() == box.size();
  for (size_t d = 0; ok && d < box.size(); ++d) {
    ok = box_offset[d] >= 0 && box_offset[d] + box[d] <= global_shape[d];
  }
  LATTICE_CHECK(ok, "{}: box {} at offset {} does not fit in global shape {}", op, shape_string(box),
                shape_string(box_offset), shape_string(global_shape));
  be.fill_normal(x.f32(), box, global_shape, box_offset, seed, stream, std);
}

}  // namespace lattice::ops
