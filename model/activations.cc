// Allocation of the per-layer saved activations and the shared layer scratch.
#include "model/activations.h"

namespace lattice {

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
    q = ctx.empty({B, T, Hq, D}, dtype);
    k = ctx.empty({B, T, Hkv, D}, dtype);
    v = ctx.empty({B, T, Hkv, D}, dtype);
    attn_out = ctx.empty({B, T, Hq, D}, dtype);
    lse = ctx.empty({B, Hq, T});  // statistics stay f32
    mid = ctx.empty({n, H}, dtype);
    up = ctx.empty({N, F}, dtype);
    if (swiglu) gate = ctx.empty({N, F}, dtype);
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
  dq = ctx.empty({B, T, Hq, D}, dtype);
  dk = ctx.empty({B, T, Hkv, D}, dtype);
  dv = ctx.empty({B, T, Hkv, D}, dtype);
  d_up = ctx.empty({N, F}, dtype);
  if (c.activation == Activation::kSwiglu) {  // GELU's backward runs with down_proj's (ops::matmul_gelu_backward)
    d_act = ctx.empty({N, F}, dtype);
    d_gate = ctx.empty({N, F}, dtype);
  }
  if (layout.sequence_parallel) {
    norm_local = ctx.empty({n, H}, dtype);
    partial = ctx.empty({N, H}, dtype);
    d_full = ctx.empty({N, H}, dtype);
    d_local = ctx.empty({n, H}, dtype);
  }
}

}  // namespace lattice
