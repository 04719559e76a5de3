// The names Megatron-LM's arguments and Hugging Face's config.json give to lattice's config keys
// (num_heads, max_position_embeddings, tensor_model_parallel_size, ...): a user who writes one gets
// the lattice key in the unknown-key error instead of a did-you-mean on spelling alone.
#pragma once

#include <optional>
#include <string>

namespace lattice {

struct ForeignName {
  std::string key;   // lattice's dotted key, e.g. "model.num_attention_heads"; "" for a feature lattice lacks
  std::string from;  // whose name `name` is, e.g. "Megatron-LM's"
  std::string note;  // "" or how the values differ, e.g. "the opposite value"; why a lacked feature is
};

// `name` (a key as written, '-' read as '_') when it is another framework's name for a lattice key.
std::optional<ForeignName> foreign_name(const std::string& name);

}  // namespace lattice
