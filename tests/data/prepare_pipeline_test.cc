// The multi-threaded prepare pipeline: output identical for any worker count and batch size,
// errors reported in input order, memory bounded by the pipeline's bounds (not the input size);
// the bounded queue, the UTF-8 validator and the progress line.
#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bounded_queue.h"
#include "data/document_reader.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "data/utf8.h"
#include "data/progress.h"
#include "kernels/error.h"
#include "tests/data/test_util.h"

using namespace lattice;
using lattice::testing::TempDir;
using lattice::testing::write_text;
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Deterministic text of `bytes` bytes: words, multi-byte UTF-8, some long lines.
std::string random_text(std::mt19937& rng, size_t bytes) {
  static const char* words[] = {"the", "lattice", "of", "tokens", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
                                "pipeline", "a", "\xf0\x9f\x98\x80", "order"};
  std::string s;
  while (s.size() < bytes) {
    s += words[rng() % 10];
    s += (rng() % 9 == 0) ? "\n" : " ";
  }
  s += "\n";
  return s;
}

// Peak RSS of this process in KiB; resets it first when asked and the kernel allows
// (/proc/self/clear_refs "5"), so later reads measure from here.
int64_t peak_rss_kib(bool reset) {
  if (reset) {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

int64_t current_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A byte-level BPE tokenizer.json (GPT-2 byte characters for all 256 bytes, a few merges,
// <|endoftext|>), so any UTF-8 text encodes.
std::string write_byte_level_tokenizer(const std::string& path) {
  std::vector<std::string> byte_char(256);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byte_char[b] = utf8(printable ? b : next++);
  }
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  std::string vocab;
  for (int b = 0; b < 256; ++b) vocab += quoted(byte_char[b]) + ": " + std::to_string(b) + ", ";
  const std::string sp = byte_char[' '];
  vocab += quoted("th") + ": 256, " + quoted("the") + ": 257, " + quoted(sp + "t") + ": 258, " +
           quoted(sp + "th") + ": 259, " + quoted(sp + "the") + ": 260, " + quoted("<|endoftext|>") + ": 261";
  std::string merges = "[" + quoted("t h") + ", " + quoted("th e") + ", " + quoted(sp + " t") + ", " +
                       quoted(sp + "t h") + ", " + quoted(sp + "th e") + "]";
  std::string json = R"({"version": "1.0", "added_tokens": [{"id": 261, "content": "<|endoftext|>", "single_word": false,
    "lstrip": false, "rstrip": false, "normalized": false, "special": true}], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
      "vocab": {)" + vocab + "}, \"merges\": " + merges + "}}";
  write_text(path, json);
  return path;
}

}  // namespace

TEST_CASE("prepare: identical output for any worker count and batch size") {
  TempDir dir("prepare_workers");
  std::mt19937 rng(7);
  // Multi-file input: JSONL, fortune-style, blank-line and whole-file text, one long document.
  {
    std::ofstream j(dir / "a.jsonl", std::ios::binary);
    for (int i = 0; i < 400; ++i) {
      std::string t = random_text(rng, 1 + rng() % 600);
      std::string esc;
      for (char c : t) esc += (c == '\n') ? std::string("\\n") : std::string(1, c);
      j << "{\"text\": \"" << esc << "\", \"id\": " << i << "}\n";
    }
  }
  {
    std::string f;
    for (int i = 0; i < 300; ++i) f += random_text(rng, 1 + rng() % 400) + "%\n";
    write_text(dir / "b.txt", f);
  }
  write_text(dir / "c.txt", random_text(rng, 200000));  // one 200 kB document (split into pieces)
  const std::vector<std::string> inputs = {dir / "a.jsonl", dir / "b.txt", dir / "c.txt"};

  auto run = [&](int workers, size_t batch_bytes, const std::string& name) {
    PrepareOptions o;
    o.inputs = inputs;
    o.output_prefix = dir / name;
    o.text_document_separator = "percent-line";
    o.workers = workers;
    o.batch_bytes = batch_bytes;
    o.progress = "none";
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(s.workers == workers);
    REQUIRE(s.documents == 400 + 300 + 1);
    return std::make_pair(read_file(o.output_prefix + ".bin"), read_file(o.output_prefix + ".idx"));
  };
  auto one = run(1, 256 << 10, "w1");
  auto three = run(3, 256 << 10, "w3");
  auto three_small = run(3, 97, "w3s");  // tiny batches: many in flight, reordering, 2000+ pieces
  auto four_small = run(4, 4096, "w4");
  REQUIRE(one.first.size() > 400000);
  REQUIRE(one.first == three.first);
  REQUIRE(one.second == three.second);
  REQUIRE(one.first == three_small.first);
  REQUIRE(one.second == three_small.second);
  REQUIRE(one.first == four_small.first);
  REQUIRE(one.second == four_small.second);
}

TEST_CASE("prepare: the first error in input order wins, whatever the worker count") {
  TempDir dir("prepare_error_order");
  std::string lines;
  for (int i = 1; i <= 2000; ++i) {
    if (i == 1500) {
      lines += "{\"text\": \"\"}\n";  // empty document, line 1500
    } else if (i == 1900) {
      lines += "not json\n";
    } else {
      lines += "{\"text\": \"document " + std::to_string(i) + "\"}\n";
    }
  }
  write_text(dir / "x.jsonl", lines);
  for (int workers : {1, 2, 5}) {
    PrepareOptions o;
    o.inputs = {dir / "x.jsonl"};
    o.output_prefix = dir / "out";
    o.workers = workers;
    o.batch_bytes = 64;
    o.progress = "none";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "x.jsonl:1500") && Catch::Contains("empty"));
    o.skip_empty_documents = true;
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "x.jsonl:1900") && Catch::Contains("not valid JSON"));
    for (const char* ext : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) REQUIRE_FALSE(fs::exists(o.output_prefix + ext));
  }
}

TEST_CASE("prepare: memory stays bounded on an input much larger than the pipeline bounds") {
  TempDir dir("prepare_memory");
  // 48 MB of text in blank-line separated documents, written in pieces (never whole in memory).
  // Its int32 tokens alone would be 192 MB.
  const int64_t kBytes = 48 << 20;
  {
    std::mt19937 rng(3);
    std::ofstream f(dir / "big.txt", std::ios::binary);
    std::string chunk = random_text(rng, 1 << 20);
    std::string paragraphs;
    for (size_t i = 0; i < chunk.size(); i += 3000) paragraphs += chunk.substr(i, 3000) + "\n\n";
    for (int64_t written = 0; written < kBytes; written += static_cast<int64_t>(paragraphs.size())) f << paragraphs;
  }
  PrepareOptions o;
  o.inputs = {dir / "big.txt"};
  o.output_prefix = dir / "big";
  o.text_document_separator = "blank-line";
  o.workers = 3;
  o.batch_bytes = 64 << 10;
  o.max_batches_in_flight = 6;
  o.progress = "none";
  const int64_t rss_before = current_rss_kib();
  peak_rss_kib(/*reset=*/true);
  PrepareSummary s = prepare_dataset(o);
  const int64_t growth_kib = peak_rss_kib(false) - rss_before;
  INFO("peak RSS growth " << growth_kib << " KiB, peak buffered " << s.peak_buffered_bytes << " bytes");
  REQUIRE(s.input_bytes >= kBytes);
  REQUIRE(s.tokens > kBytes);
  // Text + tokens in flight: at most 6 batches of ~64 KiB text (+ one paragraph) as int32 tokens.
  REQUIRE(s.peak_buffered_bytes > 0);
  REQUIRE(s.peak_buffered_bytes <= 6 * 5 * ((64 << 10) + 4096));
  // The process's peak grows by the pipeline's buffers, the reader's 1 MiB block and the
  // writer's 1 MiB buffer — tens of MB at most, not the input's 48 MB or its 192 MB of tokens.
  REQUIRE(growth_kib < 24 * 1024);
}

TEST_CASE("prepare with a BPE tokenizer: worker count invariance; invalid UTF-8 names file, line, offset") {
  TempDir dir("prepare_bpe");
  const std::string tj = write_byte_level_tokenizer(dir / "tokenizer.json");
  std::mt19937 rng(11);
  std::string f;
  for (int i = 0; i < 200; ++i) f += "the " + random_text(rng, 1 + rng() % 800) + "\n";
  write_text(dir / "a.txt", f);
  write_text(dir / "b.txt", random_text(rng, 50000));
  PrepareOptions o;
  o.inputs = {dir / "a.txt", dir / "b.txt"};
  o.text_document_separator = "blank-line";
  o.tokenizer.type = "hf";
  o.tokenizer.tokenizer_file = tj;
  o.progress = "none";
  o.batch_bytes = 512;
  std::string bin, idx;
  for (int workers : {1, 3}) {
    o.workers = workers;
    o.output_prefix = dir / ("w" + std::to_string(workers));
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(s.vocab_size == 262);
    REQUIRE(s.documents == 201);
    REQUIRE(s.tokens < s.input_bytes);  // merges used: fewer tokens than bytes
    if (workers == 1) {
      bin = read_file(o.output_prefix + ".bin");
      idx = read_file(o.output_prefix + ".idx");
    } else {
      REQUIRE(read_file(o.output_prefix + ".bin") == bin);
      REQUIRE(read_file(o.output_prefix + ".idx") == idx);
    }
  }
  // Invalid UTF-8 on line 4 of a text file, at file byte offset 8 + 4 + 3.
  write_text(dir / "bad.txt", "ok\nfine\n\nab\xc3(z\n");
  o.inputs = {dir / "a.txt", dir / "bad.txt"};
  o.output_prefix = dir / "bad";
  o.workers = 2;
  REQUIRE_THROWS_AS(prepare_dataset(o), InputError);
  REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "bad.txt:4") && Catch::Contains("byte offset 11") &&
                                              Catch::Contains("UTF-8"));
  for (const char* ext : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) REQUIRE_FALSE(fs::exists(o.output_prefix + ext));
}

TEST_CASE("prepare with an hf tokenizer whose post_processor adds a token: it starts every document") {
  TempDir dir("prepare_template");
  const std::string plain = write_byte_level_tokenizer(dir / "plain.json");
  nlohmann::json spec = nlohmann::json::parse(read_file(plain));
  // As Llama 3's: <|begin_of_text|> $A (here the one special token this vocabulary has, id 261).
  spec["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single", {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  write_text(dir / "template.json", spec.dump());
  write_text(dir / "docs.jsonl", "{\"text\": \"the\"}\n{\"text\": \"th\"}\n");
  PrepareOptions o;
  o.inputs = {dir / "docs.jsonl"};
  o.output_prefix = dir / "ds";
  o.tokenizer.type = "hf";
  o.tokenizer.tokenizer_file = dir / "template.json";
  o.progress = "none";
  prepare_dataset(o);
  IndexedDataset ds(o.output_prefix);
  REQUIRE(ds.num_documents() == 2);
  const std::vector<std::vector<int32_t>> want = {{261, 257, 261}, {261, 256, 261}};  // prefix, "the"/"th", eod
  for (int64_t d = 0; d < 2; ++d) {
    std::vector<int32_t> ids(ds.sequence_length(d));
    ds.read(d, 0, ids.size(), ids.data());
    CHECK(ids == want[static_cast<size_t>(d)]);
  }
}

TEST_CASE("BoundedQueue: capacity, order, close") {
  BoundedQueue<int> q(3);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(q.push(i));
      ++pushed;
    }
    q.close();
  });
  std::vector<int> got;
  while (auto v = q.pop()) {
    got.push_back(*v);
    if (got.size() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  producer.join();
  REQUIRE(got.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(got[i] == i);
  REQUIRE(q.peak() <= 3);
  REQUIRE(q.peak() >= 1);
  REQUIRE_FALSE(q.push(5));  // closed

  BoundedQueue<int> c(1);
  REQUIRE(c.push(1));
  std::thread blocked([&] { REQUIRE_FALSE(c.push(2)); });  // full: blocks until cancelled
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.cancel();
  blocked.join();
  REQUIRE_FALSE(c.pop().has_value());
}

TEST_CASE("find_invalid_utf8") {
  REQUIRE(find_invalid_utf8("") == std::string_view::npos);
  REQUIRE(find_invalid_utf8("plain ascii text, long enough for the 8-byte path") == std::string_view::npos);
  REQUIRE(find_invalid_utf8("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf") == std::string_view::npos);
  REQUIRE(find_invalid_utf8("abcdefghij\xff") == 10);
  REQUIRE(find_invalid_utf8("ab\xc3") == 2);              // truncated
  REQUIRE(find_invalid_utf8("ab\xc0\x80") == 2);          // overlong
  REQUIRE(find_invalid_utf8("\xe0\x80\x80") == 0);        // overlong 3-byte
  REQUIRE(find_invalid_utf8("x\xed\xa0\x80") == 1);       // surrogate
  REQUIRE(find_invalid_utf8("\xf4\x90\x80\x80") == 0);    // above U+10FFFF
  REQUIRE(find_invalid_utf8("ok\xe6\x97z") == 2);         // bad continuation
  REQUIRE(find_invalid_utf8("\x80") == 0);                // lone continuation
}

TEST_CASE("progress line") {
  ProgressSnapshot s;
  s.bytes = 50'000'000;
  s.total_bytes = 200'000'000;
  s.documents = 12345;
  s.tokens = 1'234'567;
  s.seconds = 2.0;
  std::string line = format_progress(s);
  REQUIRE(line == "25.0% 50.0/200.0 MB, 25.0 MB/s, 12,345 docs, 1.23M tokens, ETA 0:06");
  s.bytes = s.total_bytes;
  REQUIRE_THAT(format_progress(s), Catch::Contains("100.0%") && Catch::Contains("ETA 0:00"));
  REQUIRE(ProgressReporter::parse_mode("none") == ProgressReporter::Mode::kNone);
  REQUIRE_THROWS_WITH(ProgressReporter::parse_mode("fancy"), Catch::Contains("--progress fancy"));
}
