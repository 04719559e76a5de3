// Tiny GPT-2- and Llama-style model configs shared by the model and trainer tests.
#pragma once

#include "model/model_config.h"

namespace lattice::testing {

inline ModelConfig tiny_gpt2() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 4;
  c.num_kv_heads = 4;
  c.ffn_hidden_size = 32;
  c.vocab_size = 11;
  c.seq_length = 5;
  return c;
}

// GQA (2 kv heads for 4 query heads), RoPE, RMSNorm, SwiGLU, untied head, no biases.
inline ModelConfig tiny_llama() {
  ModelConfig c = tiny_gpt2();
  c.arch = Arch::kLlama;
  c.num_kv_heads = 2;
  c.norm = NormKind::kRmsNorm;
  c.activation = Activation::kSwiglu;
  c.position_embedding = PositionEmbedding::kRope;
  c.tie_embeddings = false;
  c.bias = false;
  return c;
}

}  // namespace lattice::testing
