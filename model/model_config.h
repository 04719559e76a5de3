// ModelConfig: the architecture of a GPT-2- or Llama-style decoder, as the `model` config section
// describes it. Plain data; parsing and validation live in trainer/config.cc.
#pragma once

#include <cstdint>
#include <string>

namespace lattice {

enum class Arch { kGpt2, kLlama };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class Activation { kGelu, kSwiglu };
enum class PositionEmbedding { kLearned, kRope };
// Activation recomputation: what backward recomputes instead of keeping it from forward.
// selective: the norm outputs and the MLP activation; full: the whole layer from its input.
enum class Recompute { kNone, kSelective, kFull };

struct ModelConfig {
  Arch arch = Arch::kGpt2;
  int64_t num_layers = 2;
  int64_t hidden_size = 64;
  int64_t num_attention_heads = 4;
  int64_t num_kv_heads = 4;         // == num_attention_heads for MHA; fewer for GQA
  int64_t ffn_hidden_size = 256;
  int64_t vocab_size = 257;
  int64_t seq_length = 64;          // also the size of the learned position table
  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-5;
  Activation activation = Activation::kGelu;
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  double rope_theta = 10000.0;
  bool tie_embeddings = true;
  bool bias = true;                 // biases on linear layers and LayerNorm
  double init_std = 0.02;
  std::string init_from;            // optional HF safetensors file to load instead of random init
  Recompute recompute = Recompute::kNone;
  int64_t recompute_num_layers = 0;  // full: the first N layers of each model chunk; 0 = all

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

const char* arch_name(Arch a);
const char* norm_name(NormKind n);
const char* activation_name(Activation a);
const char* position_embedding_name(PositionEmbedding p);
const char* recompute_name(Recompute r);

}  // namespace lattice
