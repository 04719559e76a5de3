// Allocation of the per-layer saved activations and the shared layer scratch.
#include "model/activations.h"

#include <vector>

namespace lattice {

namespace {
// `count` tensors of `shape` as consecutive slices of one allocation, so that the projections that
// write them (q, k, v; gate, up) and their weight gradients run as one batched GEMM
// (ops::matmul_group). memory_plan.cc counts one allocation.
std::vector<Tensor> adjacent(const DeviceContext& ctx, int64_t count, const Shape& shape, DType dtype) {
  Shape whole = shape;
  whole.insert(whole.begin(), count);
  const Tensor buffer = ctx.empty(whole, dtype);
  const int64_t each = buffer.numel() / count;
  std::vector<Tensor> slices;
  for (int64_t i = 0; i < count; ++i) slices.push_back(buffer.slice_flat(i * each, shape));
  return slices;
}

// q, k and v ([B, T, heads, D]) side by side where their shapes match (MHA), else k and v (GQA).
void allocate_qkv(const DeviceContext& ctx, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType dtype,
                  Tensor& q, Tensor& k, Tensor& v) {
  if (Hq == Hkv) {
    const std::vector<Tensor> qkv = adjacent(ctx, 3, {B, T, Hq, D}, dtype);
    q = qkv[0], k = qkv[1], v = qkv[2];
    return;
  }
  q = ctx.empty({B, T, Hq, D}, dtype);
  const std::vector<Tensor> kv = adjacent(ctx, 2, {B, T, Hkv, D}, dtype);
  k = kv[0], v = kv[1];
}
}  // namespace

void LayerActivations::allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout,
                                int64_t B, DType dtype, unsigned groups) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  const bool swiglu = c.activation == Activation::kSwiglu;
  if (groups & kInput) input = ctx.empty({n, H}, dtype);
  if (groups & kCheap) {
    norm1_out = ctx.empty({N, H}, dtype);
    norm1.allocate(ctx, n);
    norm2_out = ctx.empty({N, H}, dtype);
    norm2.allocate(ctx, n);
    act = ctx.empty({N, F}, dtype);
  }
  if (groups & kCore) {
    allocate_qkv(ctx, B, T, Hq, Hkv, D, dtype, q, k, v);
    attn_out = ctx.empty({B, T, Hq, D}, dtype);
    lse = ctx.empty({B, Hq, T});  // statistics stay f32
    mid = ctx.empty({n, H}, dtype);
    if (swiglu) {
      const std::vector<Tensor> gate_up = adjacent(ctx, 2, {N, F}, dtype);  // the order of their weights
      gate = gate_up[0], up = gate_up[1];
    } else {
      up = ctx.empty({N, F}, dtype);
    }
  }
}

void LayerActivations::share(const LayerActivations& from, unsigned groups) {
  if (groups & kInput) input = from.input;
  if (groups & kCheap) {
    norm1_out = from.norm1_out;
    norm1 = from.norm1;
    norm2_out = from.norm2_out;
    norm2 = from.norm2;
    act = from.act;
  }
  if (groups & kCore) {
    q = from.q;
    k = from.k;
    v = from.v;
    attn_out = from.attn_out;
    lse = from.lse;
    mid = from.mid;
    up = from.up;
    gate = from.gate;
  }
}

void LayerScratch::allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout, int64_t B,
                            DType dtype) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  d_hidden = ctx.empty({N, H}, dtype);
  d_mid = ctx.empty({n, H}, dtype);
  d_attn = ctx.empty({B, T, Hq, D}, dtype);
  allocate_qkv(ctx, B, T, Hq, Hkv, D, dtype, dq, dk, dv);
  if (c.activation == Activation::kSwiglu) {  // GELU's backward runs with down_proj's (ops::matmul_gelu_backward)
    d_act = ctx.empty({N, F}, dtype);
    const std::vector<Tensor> d_gate_up = adjacent(ctx, 2, {N, F}, dtype);
    d_gate = d_gate_up[0], d_up = d_gate_up[1];
  } else {
    d_up = ctx.empty({N, F}, dtype);
  }
  if (layout.sequence_parallel) {
    norm_local = ctx.empty({n, H}, dtype);
    partial = ctx.empty({N, H}, dtype);
    d_full = ctx.empty({N, H}, dtype);
    d_local = ctx.empty({n, H}, dtype);
  }
}

}  // namespace lattice
