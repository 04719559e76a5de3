// Hugging Face interop: load a GPT-2 / Llama safetensors checkpoint into a ParameterStore, and export
// a store as an HF model directory (model.safetensors + config.json) that transformers can load.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/model_config.h"
#include "model/parameter_store.h"

namespace lattice {

enum class HfFamily { kGpt2, kLlama };

// The HF family that represents `config` (GPT-2: layernorm + gelu + learned positions + biases + MHA;
// Llama: rmsnorm + swiglu + rope). A mix no family represents is an InputError naming the field.
HfFamily hf_family(const ModelConfig& config);

// Fills every parameter of `store` from HF-layout safetensors (F32/F16/BF16): a file, or a model
// directory with model.safetensors or sharded model-0000x-of-0000y.safetensors and their index (HfWeights). GPT-2 names
// may carry the "transformer." prefix; attention-mask / rotary buffers are ignored, and so is a tied
// lm_head.weight that equals the embedding. Missing tensors, shape mismatches, a different layer
// count and unexpected extra tensors (e.g. a file of the other family) are InputErrors (exit 2)
// naming the HF tensor, the file and the model field that likely differs.
void import_hf(const ModelConfig& config, const std::string& path, ParameterStore& store);

// What import_hf does, one parameter at a time and only for those `wanted` accepts (by our name):
// `take(name, value)` gets each one's whole (one-process) value, a host f32 tensor valid during the
// call, so that a rank can keep its box of it. The file is checked as import_hf says whatever is
// wanted; only the HF tensors behind wanted parameters are read (besides a tied lm_head's check).
// Host memory: one HF tensor and one parameter at a time, not the model.
// The elements of the largest HF tensor a model of `config` reads (what read_hf holds at once,
// besides a parameter cut from it, which is at most as large).
int64_t largest_hf_tensor_numel(const ModelConfig& config);

using HfWanted = std::function<bool(const std::string& name)>;
using HfTake = std::function<void(const std::string& name, const Tensor& value)>;
void read_hf(const ModelConfig& config, const std::string& path, const HfWanted& wanted, const HfTake& take);

// Writes `output_dir/model.safetensors` (F32, or BF16 rounded to nearest even when `dtype` is bf16;
// HF names; GPT-2 without the "transformer." prefix, Conv1D weights transposed back, c_attn fused) and `output_dir/config.json` (HF style). Each file
// is written atomically; `output_dir` is created when missing. `eod_id`, when the tokenizer is
// known: config.json's and generation_config.json's eos_token_id and bos_token_id (GPT-2's
// convention: one end-of-text token); unknown, null.
// A sharded save already in `output_dir` (its index and model-0000x-of-0000y shards) is removed
// once both files are written, with a warning naming what went.
void export_hf(const ModelConfig& config, const ParameterStore& store, const std::string& output_dir,
               std::optional<int32_t> eod_id = std::nullopt, DType dtype = DType::kF32);

// The HF config.json text for `config` (pretty printed, sorted keys); torch_dtype names `dtype`.
std::string hf_config_json(const ModelConfig& config, std::optional<int32_t> eod_id = std::nullopt,
                           DType dtype = DType::kF32);

}  // namespace lattice
