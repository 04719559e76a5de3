// Names of the model config's enumerations, as they appear in the JSON config.
#include "model/model_config.h"

namespace lattice {

const char* arch_name(Arch a) { return a == Arch::kGpt2 ? "gpt2" : "llama"; }
const char* norm_name(NormKind n) { return n == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* activation_name(Activation a) { return a == Activation::kGelu ? "gelu" : "swiglu"; }
const char* position_embedding_name(PositionEmbedding p) {
  return p == PositionEmbedding::kLearned ? "learned" : "rope";
}
const char* recompute_name(Recompute r) {
  return r == Recompute::kNone ? "none" : r == Recompute::kSelective ? "selective" : "full";
}

}  // namespace lattice
