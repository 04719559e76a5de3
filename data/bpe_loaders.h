// Loaders of byte-level BPE tokenizers: GPT-2's vocab.json + merges.txt and Hugging Face's
// tokenizer.json; every unsupported or malformed part is an InputError naming file and JSON path.
#pragma once

#include <memory>
#include <string>

#include "data/bpe_tokenizer.h"

namespace lattice {

// GPT-2 files: vocab.json ({token: id}) and merges.txt ("a b" per line, optional "#version"
// header); GPT-2 pre-tokenization; the eod token (default "<|endoftext|>") is a special token.
std::unique_ptr<BpeTokenizer> load_gpt2_bpe(const std::string& vocab_file,
                                            const std::string& merges_file,
                                            const std::string& eod_token,
                                            const TokenizerFileTexts* texts = nullptr);

// A Hugging Face tokenizer.json with a BPE model. eod_token empty: "<|endoftext|>", "</s>" or
// "<|end_of_text|>", the first present. Unsupported or malformed → InputError naming the file
// and the JSON path.
std::unique_ptr<BpeTokenizer> load_hf_tokenizer(const std::string& tokenizer_file,
                                                const std::string& eod_token,
                                                const TokenizerFileTexts* texts = nullptr);

}  // namespace lattice
