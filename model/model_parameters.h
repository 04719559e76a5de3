// The parameter list of a GPT-2/Llama-style model: global names, shapes, init and decay rules.
// Names (internal, layout independent; checkpoint/hf_interop.cc maps them to Hugging Face names):
//   embedding.word_embeddings.weight [V, H]       embedding.position_embeddings.weight [S, H]
//   layers.{i}.input_norm.{weight,bias} [H]       layers.{i}.post_attention_norm.{weight,bias} [H]
//   layers.{i}.attention.{q,k,v}_proj.{weight [out, H], bias [out]}  (q: Hq*D, k/v: Hkv*D)
//   layers.{i}.attention.o_proj.{weight [H, Hq*D], bias [H]}
//   layers.{i}.mlp.up_proj.{weight [F, H], bias [F]}   layers.{i}.mlp.gate_proj.weight [F, H] (swiglu)
//   layers.{i}.mlp.down_proj.{weight [H, F], bias [H]}
//   final_norm.{weight,bias} [H]                  lm_head.weight [V, H] (untied only)
// Linear weights are [out_features, in_features]. Biases exist when model.bias is true (norm
// biases only for LayerNorm).
// Tensor parallelism (layout.tp_size > 1) shards them Megatron-style, each spec carrying its
// local shape, global shape, offset and box: q/k/v_proj, gate/up_proj column-parallel (weight
// rows and bias split, whole heads per rank); o_proj, down_proj row-parallel (weight columns
// split, bias whole); word embeddings and lm_head vocab-parallel over the padded vocabulary
// (rows past V are zero padding); norms, row-parallel biases and position embeddings
// tp_duplicated (replicas on tp rank > 0).
#pragma once

#include <vector>

#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/parameter_store.h"

namespace lattice {

// The whole model (one process).
std::vector<ParamSpec> model_parameter_specs(const ModelConfig& config);
// The parameters this rank holds under `layout`: those of its pipeline chunks (the embedding on
// virtual stage 0; final norm and head on the last; with tied embeddings and pipeline > 1 the
// last stage holds a replica of the word embeddings as its head), in model order, as its tp rank
// holds them. Throws InputError when heads, kv heads or the FFN size do not divide by tp.
std::vector<ParamSpec> model_parameter_specs(const ModelConfig& config, const ModelLayout& layout);

}  // namespace lattice
