// The Hugging Face export of a trained model with its tokenizer: model.safetensors + config.json
// (checkpoint/hf_interop.h) and, when the data records its tokenizer, the tokenizer files and the
// eos/bos token ids, so the folder loads in Hugging Face tools as it is.
#pragma once

#include <string>

#include "data/tokenizer_record.h"
#include "model/model_config.h"
#include "model/parameter_store.h"
#include "trainer/config.h"

namespace lattice {

// `config.model`'s weights from `store` (an fp32 store) written in `dtype` (f32, or bf16 rounded to nearest
// even); the tokenizer recorded with `config.data` (if any).
void export_hf_model(const Config& config, const ParameterStore& store, const std::string& output_dir,
                     DType dtype = DType::kF32);

// Tokenizer files in an HF model directory: hf → tokenizer.json (the recorded file); gpt2-bpe →
// vocab.json + merges.txt; byte → a tokenizer.json that encodes exactly like it (byte-level BPE,
// the 256 bytes as ids 0..255, no merges, <|endoftext|> = 256). Plus tokenizer_config.json naming
// the end-of-document token as eos and bos and model_max_length = model.seq_length.
void export_hf_tokenizer(const TokenizerRecord& record, const ModelConfig& model, const std::string& output_dir);

}  // namespace lattice
