// prepare_dataset: the engine of `lattice data prepare` — tokenizes text / JSONL files into a
// Megatron indexed dataset, streaming, with memory bounded regardless of input size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lattice {

// One field per CLI flag of `lattice data prepare`; prepare_dataset validates them and names the
// flag in its InputError.
struct PrepareOptions {
  std::vector<std::string> inputs;    // --input FILE... (required, one or more)
  std::string output_prefix;          // --output-prefix P (required): writes P.bin and P.idx
  std::string format = "auto";        // --format auto|text|jsonl; auto: *.jsonl, *.ndjson, *.json → jsonl, else text
  std::string json_key = "text";      // --json-key: the field of each JSONL object that is a document
  std::string tokenizer = "byte";     // --tokenizer byte
  // --text-document-separator file|blank-line|percent-line: how a text file is cut into documents:
  //   file         the whole file is one document
  //   blank-line   documents are separated by one or more blank (whitespace-only) lines
  //   percent-line documents are separated by lines that are exactly "%" (fortune files)
  std::string text_document_separator = "file";
  bool append_eod = true;             // append the tokenizer's end-of-document id after each document
};

struct PrepareSummary {
  int64_t documents = 0;          // documents written
  int64_t empty_documents = 0;    // skipped: empty or whitespace-only
  int64_t tokens = 0;             // tokens written, end-of-document tokens included
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;       // size of P.bin
  double seconds = 0;
  std::string dtype;              // token dtype of P.bin ("u16" or "i32")
  int64_t vocab_size = 0;
};

// Writes opts.output_prefix + ".bin"/".idx" (atomically, see IndexedDatasetWriter) and logs a
// summary through spdlog. Bad input (missing file, invalid JSON line, missing key, bad flag value)
// throws InputError naming the file and line or the flag; no final files are left behind then.
PrepareSummary prepare_dataset(const PrepareOptions& opts);

}  // namespace lattice
