// ops::attention_*'s choice between a backend's bf16 attention (kernels/backend.h:
// attention_*_bf16, cuDNN's SDPA on CUDA) and widening bf16 operands for the f32 kernels, on the
// CUDA stand-in (the CPU kernels over host memory) with counting entries: all-bf16 tensors go to the
// bf16 entries with the op's arguments; an entry that declines the shape, a null entry, or an f32
// tensor among them takes the f32 path.
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;
using test::Tensors;

namespace {

int g_bf16_calls = 0, g_f32_calls = 0;
bool g_accept = true;  // what the bf16 entries answer

std::vector<float> widened(const uint16_t* x, int64_t n) {
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = bfloat16_to_float(x[i]);
  return f;
}
void round_into(const std::vector<float>& f, uint16_t* x) {
  for (size_t i = 0; i < f.size(); ++i) x[i] = float_to_bfloat16(f[i]);
}

// What the widening path computes (inputs widened exactly, the CPU's f32 kernel, outputs rounded), so
// that results equal it bit for bit exactly when ops passes the right pointers and shape.
bool counting_forward_bf16(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                           const AttentionShape& s) {
  ++g_bf16_calls;
  if (!g_accept) return false;
  const int64_t nq = s.batch * s.seq * s.q_heads * s.head_dim, nkv = s.batch * s.seq * s.kv_heads * s.head_dim;
  std::vector<float> fo(nq);
  cpu::backend().attention_forward(widened(q, nq).data(), widened(k, nkv).data(), widened(v, nkv).data(), fo.data(),
                                   lse, s);
  round_into(fo, out);
  return true;
}

bool counting_backward_bf16(const uint16_t* dout, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            const uint16_t* out, const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                            const AttentionShape& s) {
  ++g_bf16_calls;
  if (!g_accept) return false;
  const int64_t nq = s.batch * s.seq * s.q_heads * s.head_dim, nkv = s.batch * s.seq * s.kv_heads * s.head_dim;
  std::vector<float> fdq(nq), fdk(nkv), fdv(nkv);
  cpu::backend().attention_backward(widened(dout, nq).data(), widened(q, nq).data(), widened(k, nkv).data(),
                                    widened(v, nkv).data(), widened(out, nq).data(), lse, fdq.data(), fdk.data(),
                                    fdv.data(), s);
  round_into(fdq, dq);
  round_into(fdk, dk);
  round_into(fdv, dv);
  return true;
}

void counting_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                      const AttentionShape& s) {
  ++g_f32_calls;
  cpu::backend().attention_forward(q, k, v, out, lse, s);
}

void counting_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                       const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s) {
  ++g_f32_calls;
  cpu::backend().attention_backward(dout, q, k, v, out, lse, dq, dk, dv, s);
}

Backend counting_stand_in(bool with_bf16) {
  Backend b = test::cuda_stand_in();
  b.attention_forward = &counting_forward;
  b.attention_backward = &counting_backward;
  b.attention_forward_bf16 = with_bf16 ? &counting_forward_bf16 : nullptr;
  b.attention_backward_bf16 = with_bf16 ? &counting_backward_bf16 : nullptr;
  return b;
}

// q, k, v, out, lse, dout, dq, dk, dv for GQA (4 query heads over 2 kv heads), the listed ones bf16.
Tensors draw(const std::vector<int>& bf16_args) {
  test::Inputs in(3);
  const Tensors f32{in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 2, 8}), in.uniform({2, 5, 2, 8}),
                    in.uniform({2, 5, 4, 8}), in.uniform({2, 4, 5}),    in.uniform({2, 5, 4, 8}),
                    in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 2, 8}), in.uniform({2, 5, 2, 8})};
  return test::with_bf16(f32, bf16_args);
}

struct Outcome {
  int bf16_calls, f32_calls;
  bool same_bits;  // every output as the CPU's own (widening) path leaves it
};

Outcome run(const Tensors& host) {
  const DeviceContext device(Device::kCuda);
  Tensors t;
  for (const Tensor& h : host) t.push_back(device.to_device(h));
  g_bf16_calls = g_f32_calls = 0;
  ops::attention_forward(t[0], t[1], t[2], t[3], t[4]);
  ops::attention_backward(t[5], t[0], t[1], t[2], t[3], t[4], t[6], t[7], t[8]);
  Tensors want = test::with_bf16(host, {});
  ops::attention_forward(want[0], want[1], want[2], want[3], want[4]);
  ops::attention_backward(want[5], want[0], want[1], want[2], want[3], want[4], want[6], want[7], want[8]);
  bool same = true;
  for (int i : {3, 4, 6, 7, 8}) {
    const Tensor got = device.to_host(t[i]);
    same = same && std::memcmp(got.raw(), want[i].raw(), got.bytes()) == 0;
  }
  return {g_bf16_calls, g_f32_calls, same};
}

const std::vector<int> kAllBf16 = {0, 1, 2, 3, 5, 6, 7, 8};  // everything but the f32 lse

}  // namespace

TEST_CASE("the CPU backend has no bf16 attention entries, so its bf16 attention widens the operands") {
  CHECK(cpu::backend().attention_forward_bf16 == nullptr);
  CHECK(cpu::backend().attention_backward_bf16 == nullptr);
}

TEST_CASE("all-bf16 attention goes to the bf16 entries with the op's arguments") {
  const Backend counting = counting_stand_in(true);
  test::ScopedBackend registered(Device::kCuda, &counting);
  g_accept = true;
  const Outcome o = run(draw(kAllBf16));
  CHECK(o.bf16_calls == 2);
  CHECK(o.f32_calls == 0);
  CHECK(o.same_bits);
}

TEST_CASE("a declined shape, a null entry or an f32 tensor takes the f32 kernels") {
  const Backend counting = counting_stand_in(true);
  {
    test::ScopedBackend registered(Device::kCuda, &counting);
    g_accept = false;
    const Outcome declined = run(draw(kAllBf16));
    CHECK(declined.bf16_calls == 2);
    CHECK(declined.f32_calls == 2);
    CHECK(declined.same_bits);
    g_accept = true;
    for (const std::vector<int>& mixed : {std::vector<int>{}, {1, 2, 3, 5, 6, 7, 8}, {0, 1, 2, 5, 6, 7, 8}}) {
      const Outcome o = run(draw(mixed));
      CHECK(o.bf16_calls == 0);
      CHECK(o.f32_calls == 2);
      CHECK(o.same_bits);
    }
    // bf16 q, k, v and out with f32 gradients: the forward on the bf16 entry, the backward widened.
    const Outcome split = run(draw({0, 1, 2, 3}));
    CHECK(split.bf16_calls == 1);
    CHECK(split.f32_calls == 1);
    CHECK(split.same_bits);
  }
  const Backend without = counting_stand_in(false);
  test::ScopedBackend registered(Device::kCuda, &without);
  const Outcome o = run(draw(kAllBf16));
  CHECK(o.bf16_calls == 0);
  CHECK(o.f32_calls == 2);
  CHECK(o.same_bits);
}
