// The other frameworks' names of lattice's config keys (see config_aliases.h).
#include "trainer/config_aliases.h"

#include <algorithm>
#include <map>

namespace lattice {

namespace {

constexpr const char* kMegatron = "Megatron-LM's";
constexpr const char* kHf = "Hugging Face's";
constexpr const char* kBoth = "Megatron-LM's and Hugging Face's";
constexpr const char* kNoDropout =
    "lattice trains without dropout (dropout 0, as Llama's and most large pre-training runs do): remove the key";

const std::map<std::string, ForeignName>& table() {
  static const std::map<std::string, ForeignName> names = {
      // model
      {"num_heads", {"model.num_attention_heads", "a common", ""}},
      {"n_head", {"model.num_attention_heads", kHf, ""}},
      {"num_query_groups", {"model.num_kv_heads", kMegatron, ""}},
      {"num_key_value_heads", {"model.num_kv_heads", kHf, ""}},
      {"n_layer", {"model.num_layers", kHf, ""}},
      {"num_hidden_layers", {"model.num_layers", kHf, ""}},
      {"n_embd", {"model.hidden_size", kHf, ""}},
      {"d_model", {"model.hidden_size", "a common", ""}},
      {"intermediate_size", {"model.ffn_hidden_size", kHf, ""}},
      {"n_inner", {"model.ffn_hidden_size", kHf, ""}},
      {"max_position_embeddings", {"model.seq_length", kBoth, "the positions lattice trains are the sequence's"}},
      {"n_positions", {"model.seq_length", kHf, ""}},
      {"n_ctx", {"model.seq_length", kHf, ""}},
      {"seq_len", {"model.seq_length", "a common", ""}},
      {"max_seq_len", {"model.seq_length", "a common", ""}},
      {"block_size", {"model.seq_length", "nanoGPT's", ""}},
      {"layernorm_epsilon", {"model.norm_eps", kMegatron, ""}},
      {"norm_epsilon", {"model.norm_eps", kMegatron, ""}},
      {"layer_norm_epsilon", {"model.norm_eps", kHf, ""}},
      {"rms_norm_eps", {"model.norm_eps", kHf, ""}},
      {"rotary_base", {"model.rope_theta", kMegatron, ""}},
      {"normalization", {"model.norm", kMegatron, "layernorm or rmsnorm"}},
      {"position_embedding_type", {"model.position_embedding", kMegatron, "learned or rope"}},
      {"untie_embeddings_and_output_weights", {"model.tie_embeddings", kMegatron, "with the opposite value"}},
      {"tie_word_embeddings", {"model.tie_embeddings", kHf, ""}},
      {"init_method_std", {"model.init_std", kMegatron, ""}},
      {"initializer_range", {"model.init_std", kHf, ""}},
      {"recompute_granularity", {"model.recompute", kMegatron, "none, selective or full"}},
      {"recompute_activations", {"model.recompute", kMegatron, "set to \"selective\""}},
      {"swiglu", {"model.activation", kMegatron, "set to \"swiglu\""}},
      {"add_bias_linear", {"model.bias", kMegatron, ""}},
      {"group_query_attention", {"model.num_kv_heads", kMegatron, "fewer kv heads than attention heads is GQA"}},
      {"use_rotary_position_embeddings", {"model.position_embedding", kMegatron, "set to \"rope\""}},
      {"recompute_method", {"model.recompute_num_layers", kMegatron,
                            "with model.recompute \"full\": the first N layers of each model chunk, as block does"}},
      // Dropout: Megatron-LM's default is 0.1, so a user porting a config looks for it.
      {"hidden_dropout", {"", kMegatron, kNoDropout}},
      {"attention_dropout", {"", kMegatron, kNoDropout}},
      {"resid_pdrop", {"", kHf, kNoDropout}},
      {"attn_pdrop", {"", kHf, kNoDropout}},
      {"embd_pdrop", {"", kHf, kNoDropout}},
      {"dropout", {"", "nanoGPT's", kNoDropout}},
      // training
      {"micro_batch", {"training.micro_batch_size", "a common", ""}},
      {"global_batch", {"training.global_batch_size", "a common", ""}},
      {"bf16", {"training.precision", kMegatron, "set to \"bf16\""}},
      {"fp16", {"training.precision", kMegatron, "set to \"bf16\": fp16 is not supported"}},
      {"max_steps", {"training.train_iters", kHf, ""}},
      {"train_steps", {"training.train_iters", "a common", ""}},
      {"exit_duration_in_mins", {"training.exit_duration_mins", kMegatron, ""}},
      // optimizer
      {"learning_rate", {"optimizer.lr", kHf, ""}},
      {"max_lr", {"optimizer.lr", "a common", ""}},
      {"adam_beta1", {"optimizer.beta1", kBoth, ""}},
      {"adam_beta2", {"optimizer.beta2", kBoth, ""}},
      {"adam_eps", {"optimizer.eps", kMegatron, ""}},
      {"adam_epsilon", {"optimizer.eps", kHf, ""}},
      {"clip_grad", {"optimizer.grad_clip", kMegatron, ""}},
      {"max_grad_norm", {"optimizer.grad_clip", kHf, ""}},
      {"lr_warmup_iters", {"optimizer.warmup_iters", kMegatron, ""}},
      {"warmup_steps", {"optimizer.warmup_iters", kHf, ""}},
      {"lr_decay_style", {"optimizer.decay", kMegatron, "cosine, linear or constant"}},
      {"lr_decay_iters", {"optimizer.decay_iters", kMegatron, ""}},
      // parallel
      {"tensor_model_parallel_size", {"parallel.tensor", kMegatron, ""}},
      {"pipeline_model_parallel_size", {"parallel.pipeline", kMegatron, ""}},
      {"virtual_pipeline_model_parallel_size", {"parallel.virtual_stages", kMegatron, "with schedule \"interleaved\""}},
      {"data_parallel_size", {"parallel.data", kMegatron, ""}},
      {"use_distributed_optimizer", {"parallel.distributed_optimizer", kMegatron, ""}},
      {"sequence_parallelism", {"parallel.sequence_parallel", "a common", ""}},
      {"num_layers_per_virtual_pipeline_stage",
       {"parallel.virtual_stages", kMegatron, "a count of chunks per pipeline rank; or parallel.layers_per_stage"}},
      {"distributed_timeout_minutes", {"parallel.timeout_s", kMegatron, "in seconds"}},
      {"ddp_bucket_size", {"parallel.bucket_size_mb", kMegatron, "in MB, not elements"}},
      {"grad_reduce_in_bf16", {"parallel.grad_reduce_dtype", kMegatron, "set to \"bf16\""}},
      // data, checkpoint
      {"data_path", {"data.path", kMegatron, "a prefix, or data.blend for weighted prefixes"}},
      {"save", {"checkpoint.dir", kMegatron, ""}},
      {"output_dir", {"checkpoint.dir", kHf, ""}},
  };
  return names;
}

}  // namespace

std::optional<ForeignName> foreign_name(const std::string& name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '-', '_');
  const auto it = table().find(key);
  if (it == table().end()) return std::nullopt;
  return it->second;
}

}  // namespace lattice
