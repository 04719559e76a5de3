// Allocation of the per-layer saved activations and the shared layer scratch.
#include "model/activations.h"

namespace lattice {

void LayerActivations::allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout,
                                int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  input = ctx.empty({n, H});
  norm1_out = ctx.empty({N, H});
  norm1.allocate(ctx, n);
  q = ctx.empty({B, T, Hq, D});
  k = ctx.empty({B, T, Hkv, D});
  v = ctx.empty({B, T, Hkv, D});
  attn_out = ctx.empty({B, T, Hq, D});
  lse = ctx.empty({B, Hq, T});
  mid = ctx.empty({n, H});
  norm2_out = ctx.empty({N, H});
  norm2.allocate(ctx, n);
  up = ctx.empty({N, F});
  if (c.activation == Activation::kSwiglu) gate = ctx.empty({N, F});
  act = ctx.empty({N, F});
}

void LayerScratch::allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout, int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  d_hidden = ctx.empty({N, H});
  d_mid = ctx.empty({n, H});
  d_attn = ctx.empty({B, T, Hq, D});
  dq = ctx.empty({B, T, Hq, D});
  dk = ctx.empty({B, T, Hkv, D});
  dv = ctx.empty({B, T, Hkv, D});
  d_act = ctx.empty({N, F});
  d_up = ctx.empty({N, F});
  if (c.activation == Activation::kSwiglu) d_gate = ctx.empty({N, F});
  if (layout.sequence_parallel) {
    norm_local = ctx.empty({n, H});
    partial = ctx.empty({N, H});
    d_full = ctx.empty({N, H});
    d_local = ctx.empty({n, H});
  }
}

}  // namespace lattice
