// prepare_dataset: the engine of `lattice data prepare` — tokenizes text / JSONL files into a
// Megatron indexed dataset: streaming, multi-threaded, memory bounded regardless of input size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace lattice {

// One field per CLI flag of `lattice data prepare`; prepare_dataset validates them and names the
// flag in its InputError.
struct PrepareOptions {
  std::vector<std::string> inputs;    // --input FILE... (required, one or more)
  std::string output_prefix;          // --output-prefix P (required): writes P.bin and P.idx
  std::string format = "auto";        // --format auto|text|jsonl; auto: *.jsonl, *.ndjson, *.json → jsonl, else text
  std::string json_key = "text";      // --json-key: the field of each JSONL object that is a document
  TokenizerOptions tokenizer;         // --tokenizer, --vocab-file, --merges-file, --tokenizer-file, --eod-token
  // --text-document-separator file|blank-line|percent-line: how a text file is cut into documents:
  //   file         the whole file is one document
  //   blank-line   documents are separated by one or more blank (whitespace-only) lines
  //   percent-line documents are separated by lines that are exactly "%" (fortune files)
  std::string text_document_separator = "file";
  // Whether --json-key / --text-document-separator were given, their defaults included: one that no
  // input uses is warned about, whatever its value.
  bool json_key_given = false;
  bool separator_given = false;
  bool append_eod = true;             // append the tokenizer's end-of-document id after each document
  // --skip-empty-documents: an empty or whitespace-only document is skipped and counted; without
  // it, it is an InputError naming the file and line.
  bool skip_empty_documents = false;
  int workers = 0;                    // --workers N encoder threads; 0 = std::thread::hardware_concurrency()
  std::string progress = "auto";      // --progress auto|bar|log|none (auto: bar if stderr is a TTY, else log)
  double progress_interval_s = 5.0;   // seconds between plain progress log lines
  // Pipeline bounds (not CLI flags; tests shrink them): text per batch handed to an encoder, and
  // the most batches read but not yet written (0 = 2 × workers + 2). Long text documents are cut
  // into line-aligned pieces of about batch_bytes when the tokenizer may split text anywhere.
  size_t batch_bytes = 256 << 10;
  int max_batches_in_flight = 0;
};

struct PrepareSummary {
  int64_t documents = 0;          // documents written
  int64_t empty_documents = 0;    // skipped (--skip-empty-documents): empty or whitespace-only
  int64_t tokens = 0;             // tokens written, end-of-document tokens included
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;       // size of P.bin
  double seconds = 0;
  std::string dtype;              // token dtype of P.bin ("u16" or "i32")
  int64_t vocab_size = 0;
  int workers = 0;                // encoder threads used
  int64_t peak_buffered_bytes = 0;  // most text + token bytes held in the pipeline at once
};

// Writes opts.output_prefix + ".bin"/".idx" (atomically, see IndexedDatasetWriter) and logs a
// summary through spdlog. Bad input (missing file, invalid JSON line, missing key, empty document,
// invalid UTF-8 for a UTF-8 tokenizer, bad flag value) throws InputError naming the file and line
// (and byte offset) or the flag; no final files are left behind then.
//
// Pipeline: a reader thread cuts the inputs into documents and hands batches of them to `workers`
// encoder threads through bounded queues; this thread writes their tokens in input order, so the
// output is byte-identical for any worker count. At most max_batches_in_flight batches exist at
// once, so memory is bounded by that times batch_bytes (times ~5 for int32 tokens) plus the
// longest line — and, for a tokenizer that cannot split text anywhere (BPE), the longest document.
PrepareSummary prepare_dataset(const PrepareOptions& opts);

}  // namespace lattice
