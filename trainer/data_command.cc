// CLI11 flags of `lattice data prepare`.
#include "trainer/data_command.h"

#include <limits>

namespace lattice {

void add_tokenizer_options(CLI::App* cmd, TokenizerOptions& t) {
  cmd->add_option("--tokenizer", t.type,
                  "byte (256 bytes + end-of-document) | gpt2-bpe (--vocab-file, --merges-file) | hf (--tokenizer-file)")
      ->check(CLI::IsMember({"byte", "gpt2-bpe", "hf"}));
  cmd->add_option("--vocab-file", t.vocab_file, "gpt2-bpe: GPT-2 vocab.json");
  cmd->add_option("--merges-file", t.merges_file, "gpt2-bpe: GPT-2 merges.txt");
  cmd->add_option("--tokenizer-file", t.tokenizer_file, "hf: a Hugging Face tokenizer.json (BPE model)");
  cmd->add_option("--eod-token", t.eod_token,
                  "end-of-document token (default: gpt2-bpe <|endoftext|>; hf the first of <|endoftext|>, </s>, "
                  "<|end_of_text|> in the vocabulary)");
}

void add_inspect_options(CLI::App* cmd, InspectOptions& o) {
  cmd->add_option("prefix", o.prefix, "dataset prefix (PREFIX.bin + PREFIX.idx)")->required();
  add_tokenizer_options(cmd, o.tokenizer);
  cmd->add_option("--show", o.show, "documents to show (default 3)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
}

void add_prepare_options(CLI::App* cmd, PrepareOptions& o) {
  cmd->add_option("--input,-i", o.inputs, "input files (text or JSONL)")->required();
  cmd->add_option("--output-prefix,-o", o.output_prefix, "writes PREFIX.bin and PREFIX.idx")->required();
  cmd->add_option("--format", o.format, "auto|text|jsonl (auto: *.jsonl/*.ndjson/*.json are JSONL)")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  cmd->add_option("--json-key", o.json_key, "the JSONL field that holds a document's text")
      ->each([&o](const std::string&) { o.json_key_given = true; });
  add_tokenizer_options(cmd, o.tokenizer);
  cmd->add_option("--text-document-separator", o.text_document_separator,
                  "how text files split into documents: file|blank-line|percent-line")
      ->check(CLI::IsMember({"file", "blank-line", "percent-line"}))
      ->each([&o](const std::string&) { o.separator_given = true; });
  cmd->add_flag_callback("--no-eod", [&o] { o.append_eod = false; }, "do not append the end-of-document token");
  cmd->add_flag("--skip-empty-documents", o.skip_empty_documents,
                "skip empty or whitespace-only documents (counted and reported) instead of failing on the first");
  cmd->add_option("--workers,-j", o.workers, "encoder threads (default: one per hardware thread)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--progress", o.progress,
                  "progress display on stderr: auto (bar on a terminal, else a log line every 5 s)|bar|log|none")
      ->check(CLI::IsMember({"auto", "bar", "log", "none"}));
}

}  // namespace lattice
