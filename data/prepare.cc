// prepare_dataset: the reader → encoders → in-order writer pipeline behind `lattice data prepare`.
#include "data/prepare.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/bounded_queue.h"
#include "data/dataset_stats.h"
#include "data/document_reader.h"
#include "data/indexed_dataset_writer.h"
#include "data/progress.h"
#include "data/tokenizer.h"
#include "data/tokenizer_record.h"
#include "data/utf8.h"
#include "kernels/error.h"

namespace lattice {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// A batch of pieces on its way from the reader to an encoder, then (encoded) to the writer.
struct Batch {
  int64_t seq = 0;
  bool last = false;                       // no batch follows
  std::vector<DocumentPiece> pieces;       // text is released once encoded
  std::vector<std::vector<int32_t>> tokens;  // per piece; empty for empty documents
  std::vector<char> empty;                 // per piece: it ends an empty / whitespace-only document
  size_t error_index = kNone;              // pieces before it are good; the error belongs to it
  std::exception_ptr error;                // the encoder's error, at error_index
  std::exception_ptr reader_error;         // the reader's error, after all pieces
  int64_t bytes = 0;                       // held text + token bytes, for the memory gauge
};

// Bytes held by batches in flight, and the most ever held.
class Gauge {
 public:
  void add(int64_t b) {
    int64_t now = value_.fetch_add(b) + b;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  int64_t peak() const { return peak_.load(); }

 private:
  std::atomic<int64_t> value_{0}, peak_{0};
};

// Encoded batches waiting for the writer, keyed by sequence number; also the in-flight window:
// the reader takes a slot before it reads a batch and the writer frees it when the batch is written.
class ReorderWindow {
 public:
  explicit ReorderWindow(int slots) : slots_(slots) {}

  bool acquire_slot() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return cancelled_ || in_flight_ < slots_; });
    if (cancelled_) return false;
    ++in_flight_;
    return true;
  }
  void put(Batch batch) {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    int64_t seq = batch.seq;
    ready_.emplace(seq, std::move(batch));
    cv_.notify_all();
  }
  // Blocks until batch seq is encoded; nullopt if cancelled.
  std::optional<Batch> take(int64_t seq) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return cancelled_ || ready_.count(seq) > 0; });
    if (cancelled_) return std::nullopt;
    auto it = ready_.find(seq);
    Batch b = std::move(it->second);
    ready_.erase(it);
    return b;
  }
  void release_slot() {
    std::lock_guard lock(mu_);
    --in_flight_;
    cv_.notify_all();
  }
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    ready_.clear();
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int slots_;
  int in_flight_ = 0;
  std::map<int64_t, Batch> ready_;
  bool cancelled_ = false;
};

std::string resolve_format(const std::string& format, const std::string& path) {
  if (format != "auto") return format;
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".jsonl" || ext == ".ndjson" || ext == ".json") return "jsonl";
  return "text";
}

// Checks an input before anything is written; returns its size.
int64_t check_input(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError(fmt::format("{}: input file does not exist; check --input", path));
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(fmt::format("{}: --input is a directory; pass the files in it (e.g. {}/*)", path, path));
  }
  // A pipe or FIFO (`zcat x.gz | ... --input /dev/stdin`) can be read once only: peeking at its
  // first bytes here would take them from the reader, so only regular files are sniffed and sized.
  if (!std::filesystem::is_regular_file(path, ec)) return 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot read input file; check --input and permissions", path));
  unsigned char magic[6] = {0, 0, 0, 0, 0, 0};
  const ssize_t n = ::read(fd, magic, sizeof magic);
  ::close(fd);
  // Compressed input would be tokenized as binary text: name the format and how to stream it in.
  // (bzip2: "BZh", the block size digit, then the first bytes of a block's magic, 0x314159265359.)
  struct Compressed {
    const char* name;
    std::vector<int> magic;  // -1: any digit 1-9
    const char* cat;
  };
  static const std::vector<Compressed> kCompressed = {
      {"gzip", {0x1f, 0x8b}, "zcat"},
      {"zstd", {0x28, 0xb5, 0x2f, 0xfd}, "zstdcat"},
      {"xz", {0xfd, '7', 'z', 'X', 'Z', 0x00}, "xzcat"},
      {"bzip2", {'B', 'Z', 'h', -1, 0x31, 0x41}, "bzcat"},
  };
  const auto starts_with = [&](const std::vector<int>& m) {
    if (n < static_cast<ssize_t>(m.size())) return false;
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] == -1 ? (magic[i] < '1' || magic[i] > '9') : magic[i] != m[i]) return false;
    return true;
  };
  for (const Compressed& c : kCompressed) {
    if (starts_with(c.magic))
      throw InputError(fmt::format("{}: input is {}-compressed; decompress it first, or stream it in: {} {} | "
                                   "lattice data prepare --input /dev/stdin --format jsonl ...",
                                   path, c.name, c.cat, path));
  }
  auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

// The files `data prepare` writes for PREFIX; none of them may be an input (the commit would
// replace the input it is reading).
// One prepare per output prefix at a time: two would write the same temporaries and commit over
// each other (and the old dataset). An flock on PREFIX.lock, which the kernel drops when its holder
// dies; the file is removed when the prepare ends.
class PrefixLock {
 public:
  explicit PrefixLock(const std::string& prefix) : path_(prefix + ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError(fmt::format("--output-prefix {}: cannot create {}: {}", prefix, path_, std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw InputError(fmt::format("--output-prefix {}: another `lattice data prepare` is writing it ({} is "
                                   "locked); wait for it to end, or give another --output-prefix",
                                   prefix, path_));
    }
  }
  ~PrefixLock() {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  PrefixLock(const PrefixLock&) = delete;
  PrefixLock& operator=(const PrefixLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

void check_output_is_not_input(const std::string& prefix, const std::vector<std::string>& inputs) {
  if (std::filesystem::path(prefix).filename().empty()) {
    throw InputError(fmt::format("--output-prefix {}: names a directory; add a file name prefix (e.g. {}text)",
                                 prefix, prefix));
  }
  for (const std::string& output : {prefix + ".bin", prefix + ".idx", tokenizer_record_path(prefix),
                                    dataset_stats_path(prefix)}) {
    std::error_code ec;
    if (!std::filesystem::exists(output, ec)) continue;  // nothing to compare the inputs with
    for (const std::string& input : inputs) {
      if (std::filesystem::equivalent(input, output, ec)) {
        throw InputError(fmt::format("--input {} is also an output of --output-prefix {} ({}); choose another "
                                     "--output-prefix",
                                     input, prefix, output));
      }
    }
  }
}

// Options that none of the inputs uses, and an input given twice (a glob that overlaps another):
// the run goes on, but what the user asked for is not what happens, so say it.
void warn_on_ignored_options(const PrepareOptions& opts, const std::vector<std::string>& formats) {
  const bool any_text = std::count(formats.begin(), formats.end(), "text") > 0;
  const bool any_jsonl = std::count(formats.begin(), formats.end(), "jsonl") > 0;
  if (!any_jsonl && (opts.json_key_given || opts.json_key != "text"))
    spdlog::warn("data prepare: --json-key {} has no effect: no input is JSONL (--format, or a .jsonl/.ndjson/.json "
                 "name)",
                 opts.json_key);
  if (!any_text && (opts.separator_given || opts.text_document_separator != "file"))
    spdlog::warn("data prepare: --text-document-separator {} has no effect: every input is JSONL, one document a line",
                 opts.text_document_separator);
  // The same file twice, however spelled: by device and inode (one stat per input, not one per pair:
  // a corpus of tens of thousands of shards is listed in a glob).
  std::map<std::pair<dev_t, ino_t>, size_t> first_of;
  for (size_t i = 0; i < opts.inputs.size(); ++i) {
    struct stat st {};
    if (::stat(opts.inputs[i].c_str(), &st) != 0) continue;
    const auto [it, fresh] = first_of.try_emplace({st.st_dev, st.st_ino}, i);
    if (!fresh)
      spdlog::warn("data prepare: --input {} is the same file as --input {}: its documents go in twice",
                   opts.inputs[i], opts.inputs[it->second]);
  }
}

// Line and file offset of byte `index` of a piece.
std::string locate(const std::string& path, const DocumentPiece& p, size_t index) {
  int64_t line = p.line + std::count(p.text.begin(), p.text.begin() + static_cast<std::ptrdiff_t>(index), '\n');
  return fmt::format("{}:{}: byte offset {}", path, line, p.offset + static_cast<int64_t>(index));
}

struct EncoderContext {
  const DocumentReader* reader;
  const std::string* json_key;
  bool require_utf8;
};

// `what` says where the text is and why it must be UTF-8; only a text file's bytes can go to the
// byte tokenizer instead (a JSON line must be UTF-8 whatever the tokenizer).
void check_utf8(const EncoderContext& ctx, const DocumentPiece& p, const char* what) {
  size_t bad = find_invalid_utf8(p.text);
  if (bad == std::string_view::npos) return;
  throw InputError(fmt::format("{}: invalid UTF-8 (byte 0x{:02x}) {}; fix or drop the document (iconv -c){}",
                               locate(ctx.reader->path(p.file), p, bad),
                               static_cast<unsigned>(static_cast<unsigned char>(p.text[bad])), what,
                               p.jsonl ? "" : ", or use --tokenizer byte"));
}

// The document text of a JSONL line; throws InputError naming file and line.
std::string parse_jsonl_line(const EncoderContext& ctx, const DocumentPiece& p) {
  const std::string& path = ctx.reader->path(p.file);
  const std::string& key = *ctx.json_key;
  const int64_t lineno = p.line;
  check_utf8(ctx, p, "in a JSON line (JSON text must be UTF-8)");
  nlohmann::json obj;
  try {
    obj = nlohmann::json::parse(p.text);
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
      if (shown++ == 8) {
        keys += ", ...";
        break;
      }
      keys += (keys.empty() ? "" : ", ") + k;
    }
    throw InputError(fmt::format("{}:{}: line {} has no \"{}\" field (it has: {}); choose the field with "
                                 "--json-key",
                                 path, lineno, lineno, key, keys.empty() ? "none" : keys));
  }
  if (!it->is_string()) {
    throw InputError(fmt::format("{}:{}: line {}: field \"{}\" is a JSON {}, not a string", path, lineno, lineno,
                                 key, it->type_name()));
  }
  return std::move(it->get_ref<std::string&>());
}

void encode_batch(const EncoderContext& ctx, const Tokenizer& tok, Batch& b, Gauge& gauge) {
  const size_t n = b.pieces.size();
  b.tokens.resize(n);
  b.empty.assign(n, 0);
  int64_t before = b.bytes;
  b.bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    DocumentPiece& p = b.pieces[i];
    try {
      if (p.jsonl) {
        std::string text = parse_jsonl_line(ctx, p);
        if (is_blank(text)) {
          b.empty[i] = 1;
        } else {
          b.tokens[i] = tok.encode(text);
        }
      } else if (p.blank) {
        b.empty[i] = 1;
      } else {
        if (ctx.require_utf8) check_utf8(ctx, p, "in a text file");
        b.tokens[i] = tok.encode(p.text);
      }
    } catch (...) {
      b.error_index = i;
      b.error = std::current_exception();
      break;
    }
    if (!p.text.empty()) {
      if (b.empty[i]) {
        p.text.resize(std::min<size_t>(p.text.size(), 256));  // kept for the empty-document message
        p.text.shrink_to_fit();
      } else {
        std::string().swap(p.text);
      }
    }
    b.bytes += static_cast<int64_t>(b.tokens[i].size() * sizeof(int32_t) + p.text.size());
  }
  if (b.error) {
    for (size_t i = b.error_index; i < n; ++i) b.bytes += static_cast<int64_t>(b.pieces[i].text.size());
  }
  gauge.add(b.bytes - before);
}

std::string empty_document_message(const DocumentReader& reader, const DocumentPiece& p) {
  const std::string& path = reader.path(p.file);
  std::string what = p.jsonl ? fmt::format("line {}", p.line) : fmt::format("the document starting at line {}", p.line);
  return fmt::format("{}:{}: {} (byte offset {}) is an empty or whitespace-only document; remove it, or pass "
                     "--skip-empty-documents to skip such documents",
                     path, p.line, what, p.offset);
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
  if (opts.workers < 0 || opts.workers > 1024) {
    throw InputError(fmt::format("--workers {}: expected 1..1024 (or 0 for one per hardware thread)", opts.workers));
  }
  ProgressReporter::Mode progress_mode = ProgressReporter::parse_mode(opts.progress);
  const int workers =
      opts.workers > 0 ? opts.workers : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // The files the record copies, read once now (see read_tokenizer_files), then one tokenizer made
  // from those bytes and shared by the encoder threads (tokenizers are thread-safe, see tokenizer.h).
  const TokenizerFileTexts tokenizer_files = read_tokenizer_files(opts.tokenizer);
  std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(opts.tokenizer, &tokenizer_files);
  const Tokenizer& tok = *tokenizer;

  // Check every input before writing anything.
  check_output_is_not_input(opts.output_prefix, opts.inputs);
  int64_t total_bytes = 0;
  std::vector<std::string> formats;
  for (const std::string& path : opts.inputs) {
    total_bytes += check_input(path);
    formats.push_back(resolve_format(opts.format, path));
  }
  warn_on_ignored_options(opts, formats);

  auto parent = std::filesystem::absolute(opts.output_prefix).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    throw InputError(fmt::format("--output-prefix {}: cannot create directory {}: {}", opts.output_prefix,
                                 parent.string(), ec.message()));
  }

  auto start = std::chrono::steady_clock::now();
  PrepareSummary summary;
  summary.vocab_size = tok.vocab_size();
  summary.workers = workers;
  TokenDType dtype = token_dtype_for_vocab(tok.vocab_size());
  summary.dtype = token_dtype_name(dtype);
  const PrefixLock lock(opts.output_prefix);
  IndexedDatasetWriter writer(opts.output_prefix, dtype);

  const size_t batch_bytes = std::max<size_t>(opts.batch_bytes, 1);
  const int window = opts.max_batches_in_flight > 0 ? opts.max_batches_in_flight : 2 * workers + 2;
  std::atomic<int64_t> bytes_read{0};
  DocumentReader reader(opts.inputs, formats, sep, tok.splits_anywhere() ? batch_bytes : 0, &bytes_read);
  // BPE tokenizers read UTF-8; the byte tokenizer takes any bytes (JSON text is checked either way).
  const EncoderContext ctx{&reader, &opts.json_key, /*require_utf8=*/tok.name() != "byte"};
  BoundedQueue<Batch> work(static_cast<size_t>(window));
  ReorderWindow done(window);
  Gauge gauge;

  std::vector<std::thread> threads;
  auto stop_all = [&] {
    work.cancel();
    done.cancel();
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
  };
  try {
    threads.emplace_back([&] {
      for (int64_t seq = 0;; ++seq) {
        if (!done.acquire_slot()) return;
        Batch b;
        b.seq = seq;
        bool more = false;
        try {
          more = reader.next(b.pieces, batch_bytes);
        } catch (...) {
          b.reader_error = std::current_exception();
        }
        b.last = !more;
        for (const DocumentPiece& p : b.pieces) b.bytes += static_cast<int64_t>(p.text.size());
        gauge.add(b.bytes);
        if (!work.push(std::move(b)) || !more) return;
      }
    });
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        while (std::optional<Batch> b = work.pop()) {
          encode_batch(ctx, tok, *b, gauge);
          done.put(std::move(*b));
        }
      });
    }

    ProgressReporter progress(progress_mode, total_bytes, opts.progress_interval_s);
    const int32_t eod = tok.eod_id();
    // A Hugging Face template's tokens around every document (Llama 3's <|begin_of_text|>).
    const std::vector<int32_t> prefix = tok.document_prefix(), suffix = tok.document_suffix();
    bool document_started = false;
    for (int64_t seq = 0;; ++seq) {
      std::optional<Batch> b = done.take(seq);
      if (!b) throw Error("data prepare: pipeline stopped unexpectedly");
      for (size_t i = 0; i < b->pieces.size(); ++i) {
        if (i == b->error_index) std::rethrow_exception(b->error);
        const DocumentPiece& p = b->pieces[i];
        if (b->empty[i]) {
          if (!opts.skip_empty_documents) throw InputError(empty_document_message(reader, p));
          ++summary.empty_documents;
          continue;
        }
        if (!document_started && !prefix.empty()) writer.add_tokens(prefix);
        document_started = true;
        if (!b->tokens[i].empty()) writer.add_tokens(b->tokens[i]);
        if (p.ends) {
          if (!suffix.empty()) writer.add_tokens(suffix);
          document_started = false;
          if (opts.append_eod) writer.add_tokens(std::span<const int32_t>(&eod, 1));
          writer.end_document();
          ++summary.documents;
        }
      }
      if (b->reader_error) std::rethrow_exception(b->reader_error);
      gauge.add(-b->bytes);
      done.release_slot();
      progress.update(bytes_read.load(std::memory_order_relaxed), summary.documents, writer.num_tokens());
      if (b->last) break;
    }
    progress.finish();
    work.close();
    for (std::thread& t : threads) t.join();
    threads.clear();
    // An empty dataset trains nothing: `train` would stop at "the train split has 0 tokens".
    if (summary.documents == 0)
      throw InputError(fmt::format("data prepare: the input holds no documents ({}{}); nothing was written",
                                   fmt::join(opts.inputs, ", "),
                                   summary.empty_documents > 0
                                       ? fmt::format(": {} empty or whitespace-only, skipped", summary.empty_documents)
                                       : std::string(", empty files")));
    // Every document is in: from here the old dataset is replaced. Its records go first, once the new
    // files are durable, so that they never describe the new .bin/.idx (a failure before this point
    // leaves all four as they were).
    writer.finish([&] {
      std::filesystem::remove(tokenizer_record_path(opts.output_prefix), ec);
      std::filesystem::remove(dataset_stats_path(opts.output_prefix), ec);
    });
    write_tokenizer_record(opts.output_prefix, opts.tokenizer, tok, tokenizer_files);
    write_dataset_stats(opts.output_prefix, writer.largest_token());  // train and validate need not read the ids again
  } catch (...) {
    stop_all();
    throw;  // the writer's destructor removes its temporaries
  }
  summary.input_bytes = bytes_read.load();
  summary.tokens = writer.num_tokens();
  summary.output_bytes = writer.bytes_written();
  summary.peak_buffered_bytes = gauge.peak();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double mb = summary.input_bytes / 1e6;
  std::string empty = opts.skip_empty_documents ? fmt::format(" ({} empty skipped)", summary.empty_documents) : "";
  spdlog::info(
      "data prepare: {} documents{}, {} tokens, {:.2f} MB read in {:.2f} s ({:.1f} MB/s, {} workers) "
      "-> {}.bin/.idx + .tokenizer.json ({} tokenizer, vocab {}, dtype {}, {:.2f} MB)",
      summary.documents, empty, summary.tokens, mb, summary.seconds,
      summary.seconds > 0 ? mb / summary.seconds : 0.0, workers, opts.output_prefix, tok.name(),
      summary.vocab_size, summary.dtype, summary.output_bytes / 1e6);
  if (summary.empty_documents > 0) {
    spdlog::warn("data prepare: skipped {} empty or whitespace-only documents (--skip-empty-documents)",
                 summary.empty_documents);
  }
  return summary;
}

}  // namespace lattice
