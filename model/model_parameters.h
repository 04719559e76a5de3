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
// last stage holds a replica of the word embeddings as its head), in model order.
std::vector<ParamSpec> model_parameter_specs(const ModelConfig& config, const ModelLayout& layout);

}  // namespace lattice
