// Allocation of the per-layer saved activations and the shared backward scratch.
#include "model/activations.h"

namespace lattice {

void LayerActivations::allocate(const ModelConfig& c, int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_kv_heads;
  input = Tensor::empty({B, T, H});
  norm1_out = Tensor::empty({B, T, H});
  norm1.allocate(B * T);
  q = Tensor::empty({B, T, Hq, D});
  k = Tensor::empty({B, T, Hkv, D});
  v = Tensor::empty({B, T, Hkv, D});
  attn_out = Tensor::empty({B, T, Hq, D});
  lse = Tensor::empty({B, Hq, T});
  mid = Tensor::empty({B, T, H});
  norm2_out = Tensor::empty({B, T, H});
  norm2.allocate(B * T);
  up = Tensor::empty({B, T, F});
  if (c.activation == Activation::kSwiglu) gate = Tensor::empty({B, T, F});
  act = Tensor::empty({B, T, F});
}

void BackwardScratch::allocate(const ModelConfig& c, int64_t B) {
  const int64_t T = c.seq_length, H = c.hidden_size, D = c.head_dim(), F = c.ffn_hidden_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_kv_heads;
  d_hidden = Tensor::empty({B, T, H});
  d_mid = Tensor::empty({B, T, H});
  d_attn = Tensor::empty({B, T, Hq, D});
  dq = Tensor::empty({B, T, Hq, D});
  dk = Tensor::empty({B, T, Hkv, D});
  dv = Tensor::empty({B, T, Hkv, D});
  d_act = Tensor::empty({B, T, F});
  d_up = Tensor::empty({B, T, F});
  if (c.activation == Activation::kSwiglu) d_gate = Tensor::empty({B, T, F});
}

}  // namespace lattice
