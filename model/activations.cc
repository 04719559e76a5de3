// Allocation of the per-layer saved activations and the shared layer scratch.
#include "model/activations.h"

namespace lattice {

void LayerActivations::allocate(const ModelConfig& c, const ModelLayout& layout, int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  input = Tensor::empty({n, H});
  norm1_out = Tensor::empty({N, H});
  norm1.allocate(n);
  q = Tensor::empty({B, T, Hq, D});
  k = Tensor::empty({B, T, Hkv, D});
  v = Tensor::empty({B, T, Hkv, D});
  attn_out = Tensor::empty({B, T, Hq, D});
  lse = Tensor::empty({B, Hq, T});
  mid = Tensor::empty({n, H});
  norm2_out = Tensor::empty({N, H});
  norm2.allocate(n);
  up = Tensor::empty({N, F});
  if (c.activation == Activation::kSwiglu) gate = Tensor::empty({N, F});
  act = Tensor::empty({N, F});
}

void LayerScratch::allocate(const ModelConfig& c, const ModelLayout& layout, int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size / layout.tp_size;
  const int64_t Hq = c.num_attention_heads / layout.tp_size, Hkv = c.num_kv_heads / layout.tp_size;
  const int64_t N = B * T, n = layout.local_tokens(c, B);
  d_hidden = Tensor::empty({N, H});
  d_mid = Tensor::empty({n, H});
  d_attn = Tensor::empty({B, T, Hq, D});
  dq = Tensor::empty({B, T, Hq, D});
  dk = Tensor::empty({B, T, Hkv, D});
  dv = Tensor::empty({B, T, Hkv, D});
  d_act = Tensor::empty({N, F});
  d_up = Tensor::empty({N, F});
  if (c.activation == Activation::kSwiglu) d_gate = Tensor::empty({N, F});
  if (layout.sequence_parallel) {
    norm_local = Tensor::empty({n, H});
    partial = Tensor::empty({N, H});
    d_full = Tensor::empty({N, H});
    d_local = Tensor::empty({n, H});
  }
}

}  // namespace lattice
