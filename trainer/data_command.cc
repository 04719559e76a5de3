// CLI11 flags of `lattice data prepare`.
#include "trainer/data_command.h"

namespace lattice {

void add_prepare_options(CLI::App* cmd, PrepareOptions& o) {
  cmd->add_option("--input,-i", o.inputs, "input files (text or JSONL)")->required();
  cmd->add_option("--output-prefix,-o", o.output_prefix, "writes PREFIX.bin and PREFIX.idx")->required();
  cmd->add_option("--format", o.format, "auto|text|jsonl (auto: *.jsonl/*.ndjson/*.json are JSONL)")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  cmd->add_option("--json-key", o.json_key, "the JSONL field that holds a document's text");
  cmd->add_option("--tokenizer", o.tokenizer, "tokenizer: byte (256 bytes + end-of-document)")
      ->check(CLI::IsMember({"byte"}));
  cmd->add_option("--text-document-separator", o.text_document_separator,
                  "how text files split into documents: file|blank-line|percent-line")
      ->check(CLI::IsMember({"file", "blank-line", "percent-line"}));
  cmd->add_flag("!--no-eod", o.append_eod, "do not append the end-of-document token");
}

}  // namespace lattice
