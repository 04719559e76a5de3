// prepare_dataset: reads inputs line by line, cuts them into documents, tokenizes and streams the
// tokens into an IndexedDatasetWriter.
#include "data/prepare.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/indexed_dataset_writer.h"
#include "data/tokenizer.h"
#include "kernels/error.h"

namespace lattice {

namespace {

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// Collects one document's text and streams its tokens into the writer. Leading whitespace is held
// back until the first non-whitespace byte, so whitespace-only documents can be skipped; a
// tokenizer that cannot split text anywhere gets the whole document at once.
class DocumentBuilder {
 public:
  DocumentBuilder(const Tokenizer& tok, IndexedDatasetWriter& writer, bool append_eod, PrepareSummary& summary)
      : tok_(tok), writer_(writer), append_eod_(append_eod), summary_(summary) {}

  void add(std::string_view text) {
    if (!started_) {
      if (is_blank(text)) {
        held_.append(text);
        return;
      }
      started_ = true;
      std::string first = std::move(held_);
      held_.clear();
      first.append(text);
      emit(first);
      return;
    }
    emit(text);
  }

  void end() {
    if (!started_) {
      ++summary_.empty_documents;
    } else {
      if (!tok_.splits_anywhere()) {
        write(tok_.encode(held_));
        held_.clear();
      }
      if (append_eod_) {
        int32_t eod = tok_.eod_id();
        write(std::span<const int32_t>(&eod, 1));
      }
      writer_.end_document();
      ++summary_.documents;
    }
    started_ = false;
    held_.clear();
  }

 private:
  void emit(std::string_view text) {
    if (tok_.splits_anywhere()) {
      write(tok_.encode(text));
    } else {
      held_.append(text);
    }
  }
  void write(std::span<const int32_t> ids) {
    if (!ids.empty()) writer_.add_tokens(ids);
  }

  const Tokenizer& tok_;
  IndexedDatasetWriter& writer_;
  bool append_eod_;
  PrepareSummary& summary_;
  bool started_ = false;
  std::string held_;
};

std::string resolve_format(const std::string& format, const std::string& path) {
  if (format != "auto") return format;
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".ndjson" || ext == ".json") return "jsonl";
  return "text";
}

std::ifstream open_input(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError(fmt::format("{}: input file does not exist; check --input", path));
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(fmt::format("{}: --input is a directory; pass the files in it (e.g. {}/*)", path, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read input file; check --input and permissions", path));
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  if (in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    throw InputError(fmt::format("{}: input is gzip-compressed; decompress it first (gunzip -k)", path));
  }
  in.clear();
  in.seekg(0);
  return in;
}

// Reads the next line without its '\n'; *had_newline says whether one ended it.
bool next_line(std::istream& in, std::string& line, bool* had_newline) {
  if (!std::getline(in, line)) return false;
  *had_newline = !in.eof();
  return true;
}

void prepare_text(const std::string& path, const std::string& separator, DocumentBuilder& doc,
                  PrepareSummary& summary) {
  std::ifstream in = open_input(path);
  std::string line;
  bool nl = false;
  while (next_line(in, line, &nl)) {
    summary.input_bytes += static_cast<int64_t>(line.size()) + (nl ? 1 : 0);
    std::string_view body(line);
    if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
    bool is_separator = (separator == "percent-line" && body == "%") ||
                        (separator == "blank-line" && is_blank(body));
    if (is_separator) {
      doc.end();
      continue;
    }
    if (nl) line.push_back('\n');
    doc.add(line);
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", path));
  doc.end();
}

void prepare_jsonl(const std::string& path, const std::string& key, DocumentBuilder& doc,
                   PrepareSummary& summary) {
  std::ifstream in = open_input(path);
  std::string line;
  bool nl = false;
  int64_t lineno = 0;
  while (next_line(in, line, &nl)) {
    ++lineno;
    summary.input_bytes += static_cast<int64_t>(line.size()) + (nl ? 1 : 0);
    if (is_blank(line)) continue;
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}:{}: line {} is not valid JSON ({}); each line must be one JSON object "
                                   "with a \"{}\" field (--json-key)",
                                   path, lineno, lineno, e.what(), key));
    }
    if (!obj.is_object()) {
      throw InputError(fmt::format("{}:{}: line {} is a JSON {}, not an object with a \"{}\" field (--json-key)",
                                   path, lineno, lineno, obj.type_name(), key));
    }
    auto it = obj.find(key);
    if (it == obj.end()) {
      std::string keys;
      int shown = 0;
      for (auto& [k, v] : obj.items()) {
        if (shown++ == 8) { keys += ", ..."; break; }
        keys += (keys.empty() ? "" : ", ") + k;
      }
      throw InputError(fmt::format("{}:{}: line {} has no \"{}\" field (it has: {}); choose the field with "
                                   "--json-key",
                                   path, lineno, lineno, key, keys.empty() ? "none" : keys));
    }
    if (!it->is_string()) {
      throw InputError(fmt::format("{}:{}: line {}: field \"{}\" is a JSON {}, not a string", path, lineno,
                                   lineno, key, it->type_name()));
    }
    doc.add(it->get_ref<const std::string&>());
    doc.end();
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", path));
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& opts) {
  if (opts.inputs.empty()) throw InputError("--input: no input files given");
  if (opts.output_prefix.empty()) throw InputError("--output-prefix: required (writes PREFIX.bin and PREFIX.idx)");
  {
    std::string ext = std::filesystem::path(opts.output_prefix).extension().string();
    if (ext == ".bin" || ext == ".idx") {
      throw InputError(fmt::format("--output-prefix {}: give the prefix without .bin/.idx", opts.output_prefix));
    }
  }
  if (opts.format != "auto" && opts.format != "text" && opts.format != "jsonl") {
    throw InputError(fmt::format("--format {}: expected auto, text or jsonl", opts.format));
  }
  const std::string& sep = opts.text_document_separator;
  if (sep != "file" && sep != "blank-line" && sep != "percent-line") {
    throw InputError(fmt::format("--text-document-separator {}: expected file, blank-line or percent-line", sep));
  }
  if (opts.json_key.empty()) throw InputError("--json-key: must not be empty");
  std::unique_ptr<Tokenizer> tok = make_tokenizer(opts.tokenizer, "--tokenizer");
  // Check every input before writing anything.
  for (const std::string& path : opts.inputs) open_input(path);

  auto parent = std::filesystem::absolute(opts.output_prefix).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    throw InputError(fmt::format("--output-prefix {}: cannot create directory {}: {}", opts.output_prefix,
                                 parent.string(), ec.message()));
  }

  auto start = std::chrono::steady_clock::now();
  PrepareSummary summary;
  summary.vocab_size = tok->vocab_size();
  TokenDType dtype = token_dtype_for_vocab(tok->vocab_size());
  summary.dtype = token_dtype_name(dtype);
  IndexedDatasetWriter writer(opts.output_prefix, dtype);
  DocumentBuilder doc(*tok, writer, opts.append_eod, summary);
  for (const std::string& path : opts.inputs) {
    std::string format = resolve_format(opts.format, path);
    int64_t before = summary.documents;
    if (format == "jsonl") {
      prepare_jsonl(path, opts.json_key, doc, summary);
    } else {
      prepare_text(path, sep, doc, summary);
    }
    spdlog::debug("data prepare: {} ({}): {} documents", path, format, summary.documents - before);
  }
  writer.finish();
  summary.tokens = writer.num_tokens();
  summary.output_bytes = writer.bytes_written();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double mb = summary.input_bytes / 1e6;
  spdlog::info(
      "data prepare: {} documents ({} empty skipped), {} tokens, {:.2f} MB read in {:.2f} s ({:.1f} MB/s) "
      "-> {}.bin/.idx ({} tokenizer, vocab {}, dtype {}, {:.2f} MB)",
      summary.documents, summary.empty_documents, summary.tokens, mb, summary.seconds,
      summary.seconds > 0 ? mb / summary.seconds : 0.0, opts.output_prefix, tok->name(), summary.vocab_size,
      summary.dtype, summary.output_bytes / 1e6);
  return summary;
}

}  // namespace lattice
