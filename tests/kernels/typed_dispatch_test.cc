// ops.cc's wiring of Backend::typed (kernels/typed_kernels.h), proved on the CPU. The CUDA backend's
// typed kernels load bf16 and store rounded bf16 in one pass; there is no GPU here, so this test gives
// the CUDA stand-in (the CPU kernels over host memory) a host typed table whose every entry widens its
// bf16 operands into f32 host buffers, runs the CPU's f32 kernel and rounds the written ones back to
// nearest even: the bits F32Staging gives, so the backend harness must match the CPU oracle bit for
// bit in every f32, bf16 and mixed case exactly when ops.cc hands each typed entry the right
// pointers, dtype flags, sizes and form (plain embedding = shard with first_row 0 and rows V, the
// [B, T, H] position embedding = tokens with first_token 0 and seq T, cross_entropy_backward = shard
// backward over all V columns). Counting entries show that each op reaches its entry, once, with f32
// operands as with bf16 ones; broken tables show that the comparison catches a wrong entry.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/bf16.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/device_context.h"
#include "kernels/error.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;

namespace {

// Every TypedKernels entry, in declaration order.
#define TYPED_ENTRIES(X)                                                                                       \
  X(fill) X(scale) X(axpy) X(add) X(add_bias) X(bias_backward) X(bias_backward_group)                          \
  X(embedding_forward_shard) X(embedding_backward_shard) X(add_position_embedding_tokens)                      \
  X(position_embedding_backward_tokens)                                                                         \
  X(layernorm_forward) X(layernorm_backward) X(rmsnorm_forward) X(rmsnorm_backward) X(gelu_forward)            \
  X(gelu_backward) X(swiglu_forward) X(swiglu_backward) X(rope) X(cross_entropy_forward)                       \
  X(cross_entropy_shard_max) X(cross_entropy_shard_sums) X(cross_entropy_shard_backward)                      \
  X(cross_entropy_forward_backward)

enum Entry {
#define X(name) k_##name,
  TYPED_ENTRIES(X)
#undef X
  kEntries
};
constexpr const char* kEntryNames[] = {
#define X(name) #name,
    TYPED_ENTRIES(X)
#undef X
};
// A new TypedKernels entry must be added to TYPED_ENTRIES (and so given a host stand-in below).
static_assert(sizeof(TypedKernels) == kEntries * sizeof(void (*)()));

// Calls of each entry since reset(), split by whether any data operand was bf16.
std::array<int, kEntries> g_f32_calls, g_bf16_calls;
bool g_saw_bf16 = false;  // set by HostOperands during one entry call
void reset_counts() {
  g_f32_calls.fill(0);
  g_bf16_calls.fill(0);
}

// The f32 pointers one entry call hands its CPU kernel, as F32Staging hands them on the CPU: an f32
// operand is its own pointer (null data: null), a bf16 one an f32 host buffer, widened when read and
// rounded back by finish() when written, one buffer for every operand with the same data (aliases).
class HostOperands {
 public:
  explicit HostOperands(uint16_t (*round)(float) = &float_to_bfloat16) : round_(round) {}
  const float* in(DataIn x, int64_t n) { return get(const_cast<void*>(x.data), x.bf16, n, true, false); }
  float* out(DataOut x, int64_t n) { return get(x.data, x.bf16, n, false, true); }
  float* in_out(DataOut x, int64_t n) { return get(x.data, x.bf16, n, true, true); }
  void finish() {
    for (const Buffer& b : buffers_)
      if (b.written)
        for (int64_t i = 0; i < b.n; ++i) b.bf16[i] = round_(b.f32[i]);
  }

 private:
  struct Buffer {
    uint16_t* bf16;
    int64_t n;
    std::vector<float> f32;  // moving a Buffer keeps the elements where they are
    bool widened, written;
  };
  float* get(void* data, bool bf16, int64_t n, bool read, bool write) {
    if (data == nullptr || !bf16) return static_cast<float*>(data);
    g_saw_bf16 = true;
    auto* x = static_cast<uint16_t*>(data);
    Buffer* b = nullptr;
    for (Buffer& have : buffers_)
      if (have.bf16 == x && have.n == n) b = &have;
    if (b == nullptr) b = &buffers_.emplace_back(Buffer{x, n, std::vector<float>(n), false, false});
    if (read && !b->widened)
      for (int64_t i = 0; i < n; ++i) b->f32[i] = bfloat16_to_float(x[i]);
    b->widened = b->widened || read;
    b->written = b->written || write;
    return b->f32.data();
  }

  uint16_t (*round_)(float);
  std::vector<Buffer> buffers_;
};

// The host stand-ins: each entry's operands through HostOperands around the CPU f32 kernel.
namespace host {
using H = HostOperands;
void fill(DataOut x, int64_t n, float value) {
  H h;
  cpu::fill(h.out(x, n), n, value);
  h.finish();
}
void scale(DataOut x, int64_t n, float alpha) {
  H h;
  cpu::scale(h.in_out(x, n), n, alpha);
  h.finish();
}
void axpy(float alpha, DataIn x, DataOut y, int64_t n) {
  H h;
  cpu::axpy(alpha, h.in(x, n), h.in_out(y, n), n);
  h.finish();
}
void add(DataIn a, DataIn b, DataOut out, int64_t n) {
  H h;
  cpu::add(h.in(a, n), h.in(b, n), h.out(out, n), n);
  h.finish();
}
void add_bias(DataOut y, DataIn bias, int64_t rows, int64_t cols) {
  H h;
  cpu::add_bias(h.in_out(y, rows * cols), h.in(bias, cols), rows, cols);
  h.finish();
}
void bias_backward(DataIn dy, DataOut dbias, int64_t rows, int64_t cols) {
  H h;
  cpu::bias_backward(h.in(dy, rows * cols), h.in_out(dbias, cols), rows, cols);
  h.finish();
}
void bias_backward_group(const DataIn* dys, const DataOut* dbiases, int count, int64_t rows, int64_t cols) {
  for (int i = 0; i < count; ++i) bias_backward(dys[i], dbiases[i], rows, cols);
}
void embedding_forward_shard(const int32_t* ids, DataIn table, DataOut out, int64_t n, int64_t hidden,
                             int64_t first_row, int64_t rows) {
  H h;
  cpu::embedding_forward_shard(ids, h.in(table, rows * hidden), h.out(out, n * hidden), n, hidden, first_row, rows);
  h.finish();
}
void embedding_backward_shard(const int32_t* ids, DataIn dout, float* dtable, int64_t n, int64_t hidden,
                              int64_t first_row, int64_t rows) {
  H h;
  cpu::embedding_backward_shard(ids, h.in(dout, n * hidden), dtable, n, hidden, first_row, rows);
}
// The tokens' positions are below seq: rows [0, seq) of the [P >= seq, H] table are all they touch.
void add_position_embedding_tokens(DataOut x, DataIn table, int64_t n, int64_t hidden, int64_t seq,
                                   int64_t first_token) {
  H h;
  cpu::add_position_embedding_tokens(h.in_out(x, n * hidden), h.in(table, seq * hidden), n, hidden, seq, first_token);
  h.finish();
}
void position_embedding_backward_tokens(DataIn dx, DataOut dtable, int64_t n, int64_t hidden, int64_t seq,
                                        int64_t first_token) {
  H h;
  cpu::position_embedding_backward_tokens(h.in(dx, n * hidden), h.in_out(dtable, seq * hidden), n, hidden, seq,
                                          first_token);
  h.finish();
}
void layernorm_forward(DataIn x, DataIn gamma, DataIn beta, float eps, DataOut y, float* mean, float* rstd,
                       int64_t rows, int64_t hidden) {
  H h;
  cpu::layernorm_forward(h.in(x, rows * hidden), h.in(gamma, hidden), h.in(beta, hidden), eps,
                         h.out(y, rows * hidden), mean, rstd, rows, hidden);
  h.finish();
}
void layernorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* mean, const float* rstd, DataIn residual,
                        DataOut dx, DataOut dgamma, DataOut dbeta, int64_t rows, int64_t hidden) {
  {
    H h;
    cpu::layernorm_backward(h.in(dy, rows * hidden), h.in(x, rows * hidden), h.in(gamma, hidden), mean, rstd,
                            h.out(dx, rows * hidden), h.in_out(dgamma, hidden), h.in_out(dbeta, hidden), rows, hidden);
    h.finish();
  }
  if (residual.data != nullptr) add(DataIn{dx.data, dx.bf16}, residual, dx, rows * hidden);
}
void rmsnorm_forward(DataIn x, DataIn gamma, float eps, DataOut y, float* rstd, int64_t rows, int64_t hidden) {
  H h;
  cpu::rmsnorm_forward(h.in(x, rows * hidden), h.in(gamma, hidden), eps, h.out(y, rows * hidden), rstd, rows, hidden);
  h.finish();
}
void rmsnorm_backward(DataIn dy, DataIn x, DataIn gamma, const float* rstd, DataIn residual, DataOut dx,
                      DataOut dgamma, int64_t rows, int64_t hidden) {
  {
    H h;
    cpu::rmsnorm_backward(h.in(dy, rows * hidden), h.in(x, rows * hidden), h.in(gamma, hidden), rstd,
                          h.out(dx, rows * hidden), h.in_out(dgamma, hidden), rows, hidden);
    h.finish();
  }
  if (residual.data != nullptr) add(DataIn{dx.data, dx.bf16}, residual, dx, rows * hidden);
}
void gelu_forward(DataIn x, DataOut y, int64_t n) {
  H h;
  cpu::gelu_forward(h.in(x, n), h.out(y, n), n);
  h.finish();
}
void gelu_backward(DataIn dy, DataIn x, DataOut dx, int64_t n) {
  H h;
  cpu::gelu_backward(h.in(dy, n), h.in(x, n), h.out(dx, n), n);
  h.finish();
}
void swiglu_forward(DataIn gate, DataIn up, DataOut y, int64_t n) {
  H h;
  cpu::swiglu_forward(h.in(gate, n), h.in(up, n), h.out(y, n), n);
  h.finish();
}
void swiglu_backward(DataIn dy, DataIn gate, DataIn up, DataOut dgate, DataOut dup, int64_t n) {
  H h;
  cpu::swiglu_backward(h.in(dy, n), h.in(gate, n), h.in(up, n), h.out(dgate, n), h.out(dup, n), n);
  h.finish();
}
void rope(DataOut x, int64_t batch, int64_t seq, int64_t heads, int64_t dim, float theta, bool inverse) {
  H h;
  cpu::rope(h.in_out(x, batch * seq * heads * dim), batch, seq, heads, dim, theta, inverse);
  h.finish();
}
void cross_entropy_forward(DataIn logits, const int32_t* targets, float* losses, float* lse, int64_t rows,
                           int64_t vocab) {
  H h;
  cpu::cross_entropy_forward(h.in(logits, rows * vocab), targets, losses, lse, rows, vocab);
}
void cross_entropy_shard_max(DataIn logits, float* row_max, int64_t rows, int64_t cols, int64_t valid) {
  H h;
  cpu::cross_entropy_shard_max(h.in(logits, rows * cols), row_max, rows, cols, valid);
}
void cross_entropy_shard_sums(DataIn logits, const int32_t* targets, const float* row_max, float* sum_exp,
                              float* target_logit, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
  H h;
  cpu::cross_entropy_shard_sums(h.in(logits, rows * cols), targets, row_max, sum_exp, target_logit, rows, cols,
                                first_col, valid);
}
void cross_entropy_shard_backward(DataIn logits, const int32_t* targets, const float* lse, float grad_scale,
                                  DataOut dlogits, int64_t rows, int64_t cols, int64_t first_col, int64_t valid) {
  H h;
  cpu::cross_entropy_shard_backward(h.in(logits, rows * cols), targets, lse, grad_scale, h.out(dlogits, rows * cols),
                                    rows, cols, first_col, valid);
  h.finish();
}
void cross_entropy_forward_backward(DataIn logits, const int32_t* targets, float grad_scale, float* losses, float* lse,
                                    DataOut dlogits, int64_t rows, int64_t vocab) {
  H h;
  const float* x = h.in(logits, rows * vocab);
  cpu::cross_entropy_forward(x, targets, losses, lse, rows, vocab);
  cpu::cross_entropy_backward(x, targets, lse, grad_scale, h.out(dlogits, rows * vocab), rows, vocab);
  h.finish();
}

// Deliberately wrong: add rounds its bf16 output by truncation; gelu_forward reads x as bf16
// whatever its flag says (in bounds: an f32 x has twice the bytes).
uint16_t truncate(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }
void add_truncating(DataIn a, DataIn b, DataOut out, int64_t n) {
  H h(&truncate);
  cpu::add(h.in(a, n), h.in(b, n), h.out(out, n), n);
  h.finish();
}
void gelu_forward_flag_ignored(DataIn x, DataOut y, int64_t n) {
  H h;
  cpu::gelu_forward(h.in(DataIn{x.data, true}, n), h.out(y, n), n);
  h.finish();
}
}  // namespace host

// An entry that counts its calls, then runs F.
template <auto F, int I>
struct Counted;
template <typename... A, void (*F)(A...), int I>
struct Counted<F, I> {
  static void call(A... a) {
    g_saw_bf16 = false;
    F(a...);
    ++(g_saw_bf16 ? g_bf16_calls : g_f32_calls)[I];
  }
};

const TypedKernels kCountedHost = {
#define X(name) .name = &Counted<&host::name, k_##name>::call,
    TYPED_ENTRIES(X)
#undef X
};

// The CUDA stand-in with `table` as its typed kernels.
Backend typed_stand_in(const TypedKernels* table) {
  Backend b = test::cuda_stand_in();
  b.typed = table;
  return b;
}

// The typed entries each harness case's op reaches, an entry listed once per call (none: empty):
// the plain and [B, T, H] forms go to the shard and token entries, matmul only for k = 0, a c = beta
// c (scale), and the GEMMs with more (no fused GEMM on the stand-in) for what follows the product:
// matmul_bias its bias add, matmul_bias_gelu its bias add (where it has a bias) and the GELU,
// matmul_gelu_backward the GELU's backward, matmul_group with biases one bias add per product, and
// matmul_residual its bias add (where it has a bias) and the residual's add.
std::vector<int> entries_of(const test::OpCase& c) {
  if (c.op == "matmul_group") {
    return c.what == "q, k, v with biases" ? std::vector<int>(3, k_add_bias) : std::vector<int>{};
  }
  if (c.op == "matmul_bias_gelu") {
    return c.what == "no bias" ? std::vector<int>{k_gelu_forward} : std::vector<int>{k_add_bias, k_gelu_forward};
  }
  if (c.op == "matmul_gelu_backward") return {k_gelu_backward};
  if (c.op == "matmul_residual") {
    return c.what == "no bias, residual at an odd offset" ? std::vector<int>{k_add} : std::vector<int>{k_add_bias, k_add};
  }
  static const std::map<std::string, int> kEntryOf = {
      {"fill", k_fill},
      {"scale", k_scale},
      {"axpy", k_axpy},
      {"add", k_add},
      {"add_bias", k_add_bias},
      {"matmul_bias", k_add_bias},
      {"bias_backward", k_bias_backward},
      {"linear_weight_grad", k_bias_backward},  // after the GEMM, unfused on the stand-in
      {"bias_backward_group", k_bias_backward_group},
      {"embedding_forward", k_embedding_forward_shard},
      {"embedding_backward", k_embedding_backward_shard},
      {"embedding_forward_shard", k_embedding_forward_shard},
      {"embedding_backward_shard", k_embedding_backward_shard},
      {"add_position_embedding", k_add_position_embedding_tokens},
      {"position_embedding_backward", k_position_embedding_backward_tokens},
      {"layernorm_forward", k_layernorm_forward},
      {"layernorm_backward", k_layernorm_backward},
      {"rmsnorm_forward", k_rmsnorm_forward},
      {"rmsnorm_backward", k_rmsnorm_backward},
      {"gelu_forward", k_gelu_forward},
      {"gelu_backward", k_gelu_backward},
      {"swiglu_forward", k_swiglu_forward},
      {"swiglu_backward", k_swiglu_backward},
      {"rope_forward", k_rope},
      {"rope_backward", k_rope},
      {"cross_entropy_forward", k_cross_entropy_forward},
      {"cross_entropy_backward", k_cross_entropy_shard_backward},
      {"cross_entropy_shard_max", k_cross_entropy_shard_max},
      {"cross_entropy_shard_sums", k_cross_entropy_shard_sums},
      {"cross_entropy_shard_backward", k_cross_entropy_shard_backward},
      {"cross_entropy_forward_backward", k_cross_entropy_forward_backward},
  };
  if (c.op == "matmul") return c.what == "k = 0" ? std::vector<int>{k_scale} : std::vector<int>{};
  const auto it = kEntryOf.find(c.op);
  return it == kEntryOf.end() ? std::vector<int>{} : std::vector<int>{it->second};
}

std::vector<test::OpMismatch> compare_with(const TypedKernels& table) {
  const Backend typed = typed_stand_in(&table);
  test::ScopedBackend registered(Device::kCuda, &typed);
  return test::compare_backend_ops(Device::kCuda, /*exact=*/true, /*seed=*/7);
}

std::string op_of(const std::string& case_name) { return case_name.substr(0, case_name.find(" (")); }

}  // namespace

TEST_CASE("the CPU backend and the plain stand-in have no typed kernels: they stage bf16 through f32") {
  CHECK(cpu::backend().typed == nullptr);
  CHECK(test::cuda_stand_in().typed == nullptr);
}

TEST_CASE("the host typed table fills every entry") {
  std::array<void (*)(), kEntries> entries;
  std::memcpy(entries.data(), &kCountedHost, sizeof(kCountedHost));
  for (int i = 0; i < kEntries; ++i) {
    INFO(kEntryNames[i]);
    CHECK(entries[i] != nullptr);
  }
}

TEST_CASE("through the host typed table every harness case matches the CPU bit for bit, every entry called") {
  reset_counts();
  const std::vector<test::OpMismatch> found = compare_with(kCountedHost);
  for (const test::OpMismatch& m : found) FAIL_CHECK(m.op << ": " << m.detail);
  CHECK(found.empty());
  for (int i = 0; i < kEntries; ++i) {
    INFO(kEntryNames[i] << ": " << g_f32_calls[i] << " all-f32 calls, " << g_bf16_calls[i] << " with bf16");
    CHECK(g_f32_calls[i] > 0);
    CHECK(g_bf16_calls[i] > 0);
  }
}

TEST_CASE("each op reaches its typed entries once per call, with all-f32 operands as with bf16 ones") {
  const Backend typed = typed_stand_in(&kCountedHost);
  test::ScopedBackend registered(Device::kCuda, &typed);
  const DeviceContext device(Device::kCuda);
  for (const test::OpCase& c : test::op_cases()) {
    std::vector<std::vector<int>> runs = {{}};  // the f32 run, then the bf16 ones
    runs.insert(runs.end(), c.bf16.begin(), c.bf16.end());
    for (const std::vector<int>& bf16_args : runs) {
      test::Inputs in(11);
      test::Tensors t;
      for (const Tensor& h : test::with_bf16(c.make(in), bf16_args)) t.push_back(device.to_device(h));
      reset_counts();
      bool threw = false;
      try {
        c.run(t);
      } catch (const Error&) {
        threw = true;  // the op's checks come before any kernel
      }
      const std::vector<int> want = threw ? std::vector<int>{} : entries_of(c);
      // The GEMMs with more reach the table after the product, through kernels that see only the
      // arguments after the two GEMM operands (2 and on).
      const bool bf16_call = c.op.rfind("matmul_", 0) == 0
                                 ? std::any_of(bf16_args.begin(), bf16_args.end(), [](int a) { return a >= 2; })
                                 : !bf16_args.empty();
      INFO(test::case_name(c, bf16_args) << (threw ? " (throws)" : ""));
      for (int i = 0; i < kEntries; ++i) {
        INFO("entry " << kEntryNames[i]);
        const auto calls = static_cast<int>(std::count(want.begin(), want.end(), i));
        CHECK(g_f32_calls[i] == (bf16_call ? 0 : calls));
        CHECK(g_bf16_calls[i] == (bf16_call ? calls : 0));
      }
    }
  }
}

TEST_CASE("a typed entry that rounds or reads wrongly shows up as mismatches of its op, and only of it") {
  SECTION("add rounds its bf16 output by truncation: its bf16 runs differ") {
    TypedKernels broken = kCountedHost;
    broken.add = &host::add_truncating;
    const std::vector<test::OpMismatch> found = compare_with(broken);
    REQUIRE(!found.empty());
    for (const test::OpMismatch& m : found) {
      INFO(m.op << ": " << m.detail);
      CHECK(op_of(m.op) == "add");
      CHECK(m.op.find("bf16") != std::string::npos);
    }
  }
  SECTION("gelu_forward ignores the dtype flag of x: its f32 run differs (and matmul_bias_gelu's, which calls it)") {
    TypedKernels broken = kCountedHost;
    broken.gelu_forward = &host::gelu_forward_flag_ignored;
    const std::vector<test::OpMismatch> found = compare_with(broken);
    REQUIRE(!found.empty());
    bool f32_run = false;
    for (const test::OpMismatch& m : found) {
      INFO(m.op << ": " << m.detail);
      CHECK((op_of(m.op) == "gelu_forward" || op_of(m.op) == "matmul_bias_gelu"));
      f32_run = f32_run || m.op == "gelu_forward";
    }
    CHECK(f32_run);
  }
}

TEST_CASE("the staging contract (bf16 runs = the widened f32 run rounded once) holds through the host typed "
          "table, and a truncating typed add breaks it") {
  {
    const Backend typed = typed_stand_in(&kCountedHost);
    test::ScopedBackend registered(Device::kCuda, &typed);
    for (const test::OpMismatch& m : test::compare_bf16_contract(Device::kCuda, test::kOwnBf16Kernels)) {
      FAIL_CHECK(m.op << ": " << m.detail);
    }
  }
  TypedKernels broken = kCountedHost;
  broken.add = &host::add_truncating;
  const Backend typed = typed_stand_in(&broken);
  test::ScopedBackend registered(Device::kCuda, &typed);
  const std::vector<test::OpMismatch> found = test::compare_bf16_contract(Device::kCuda, test::kOwnBf16Kernels);
  REQUIRE(!found.empty());
  for (const test::OpMismatch& m : found) {
    INFO(m.op << ": " << m.detail);
    CHECK(op_of(m.op) == "add");
  }
}
