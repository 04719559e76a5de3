// prepare_dataset on text (file, blank-line, fortune "%" separators) and JSONL, and its errors;
// the byte tokenizer.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "kernels/error.h"
#include "tests/data/test_util.h"
#include "tests/log_capture.h"

using namespace lattice;
using lattice::testing::TempDir;
using lattice::testing::write_text;
namespace fs = std::filesystem;

namespace {

// Documents of a dataset decoded with the byte tokenizer; EOD must end each one and only there.
std::vector<std::string> read_documents(const std::string& prefix) {
  IndexedDataset ds(prefix);
  REQUIRE(ds.dtype() == TokenDType::kU16);
  ByteTokenizer tok;
  std::vector<std::string> docs;
  for (int64_t d = 0; d < ds.num_documents(); ++d) {
    std::vector<int32_t> ids(ds.sequence_length(d));
    ds.read(d, 0, ids.size(), ids.data());
    REQUIRE(!ids.empty());
    REQUIRE(ids.back() == ByteTokenizer::kEod);
    ids.pop_back();
    for (int32_t id : ids) REQUIRE(id != ByteTokenizer::kEod);
    docs.push_back(tok.decode(ids));
  }
  return docs;
}

}  // namespace

TEST_CASE("byte tokenizer") {
  auto tok = make_tokenizer(TokenizerOptions{});
  REQUIRE(tok->name() == "byte");
  REQUIRE(tok->vocab_size() == 257);
  REQUIRE(tok->eod_id() == 256);
  std::string text = "h\xc3\xa9llo\n\x00\xff";
  text.push_back('\0');
  auto ids = tok->encode(text);
  REQUIRE(ids.size() == text.size());
  REQUIRE(ids[1] == 0xc3);
  REQUIRE(tok->decode(ids) == text);
  std::vector<int32_t> eod = {104, 256};
  REQUIRE(tok->decode(eod) == "h<|endoftext|>");
  std::vector<int32_t> bad = {257};
  REQUIRE_THROWS_AS(tok->decode(bad), Error);
  REQUIRE_THROWS_WITH(make_tokenizer(TokenizerOptions{.type = "gpt3"}), Catch::Contains("--tokenizer gpt3"));
}

TEST_CASE("prepare text files") {
  TempDir dir("prepare_text");
  PrepareOptions o;
  o.output_prefix = dir / "out/ds";  // the directory is created
  SECTION("fortune format: % lines separate documents") {
    write_text(dir / "fortunes", "first one\n%\ntwo\n  lines\n%\n%\n  \n%\nlast, no newline");
    write_text(dir / "more", "A\r\n%\r\nB\n%\n");
    o.inputs = {dir / "fortunes", dir / "more"};
    o.text_document_separator = "percent-line";
    o.skip_empty_documents = true;
    PrepareSummary s = prepare_dataset(o);
    auto docs = read_documents(o.output_prefix);
    REQUIRE(docs == std::vector<std::string>{"first one\n", "two\n  lines\n", "last, no newline", "A\r\n", "B\n"});
    REQUIRE(s.documents == 5);
    REQUIRE(s.empty_documents == 2);  // "%%" and "  "; nothing after a final % is no document
    REQUIRE(s.tokens == 10 + 12 + 16 + 3 + 2 + 5);
    REQUIRE(s.input_bytes == static_cast<int64_t>(fs::file_size(dir / "fortunes") + fs::file_size(dir / "more")));
    REQUIRE(s.dtype == "u16");
  }
  SECTION("blank lines separate documents") {
    write_text(dir / "a.txt", "\n\npara one\nstill one\n\n \n\npara two\n");
    o.inputs = {dir / "a.txt"};
    o.text_document_separator = "blank-line";
    prepare_dataset(o);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"para one\nstill one\n", "para two\n"});
  }
  SECTION("each file is one document") {
    write_text(dir / "a.txt", "\nwhole\n\nfile\n%\n");
    write_text(dir / "b.txt", "   \n");
    write_text(dir / "c.txt", "c");
    o.inputs = {dir / "a.txt", dir / "b.txt", dir / "c.txt"};
    o.skip_empty_documents = true;
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"\nwhole\n\nfile\n%\n", "c"});
    REQUIRE(s.empty_documents == 1);
  }
  SECTION("an empty document is an error naming file and line, unless skipped") {
    write_text(dir / "f", "one\n%\ntwo\n%\n%\nthree\n%\n");
    o.inputs = {dir / "f"};
    o.text_document_separator = "percent-line";
    o.workers = 2;
    REQUIRE_THROWS_AS(prepare_dataset(o), InputError);
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "f:5") && Catch::Contains("line 5") &&
                                                Catch::Contains("--skip-empty-documents"));
    for (const char* ext : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) REQUIRE_FALSE(fs::exists(o.output_prefix + ext));
    write_text(dir / "g", "x\n%\n   \n\n%\ny\n");  // whitespace-only, starting at line 3
    o.inputs = {dir / "g"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "g:3") && Catch::Contains("whitespace"));
    write_text(dir / "e.txt", "");
    o.inputs = {dir / "e.txt"};
    o.text_document_separator = "file";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "e.txt:1"));
    o.inputs = {dir / "f", dir / "g", dir / "e.txt"};
    o.text_document_separator = "percent-line";
    o.skip_empty_documents = true;
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"one\n", "two\n", "three\n", "x\n", "y\n"});
    REQUIRE(s.empty_documents == 2);  // f's "%%", g's whitespace; e.txt is empty: no bytes, no document
  }
  SECTION("a real fortune file, if installed") {
    const std::string f = "/usr/share/games/fortunes/fortunes";
    if (!fs::exists(f)) return;
    o.inputs = {f};
    o.text_document_separator = "percent-line";
    o.skip_empty_documents = true;
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(s.documents > 10);
    for (const std::string& d : read_documents(o.output_prefix)) REQUIRE(d.find("\n%\n") == std::string::npos);
  }
  SECTION("bad flags and inputs name the flag or file") {
    o.inputs = {dir / "missing.txt"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("missing.txt") && Catch::Contains("--input"));
    write_text(dir / "a.txt", "x");
    o.inputs = {dir / "a.txt"};
    o.text_document_separator = "comma";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("--text-document-separator comma"));
    o.text_document_separator = "file";
    o.format = "csv";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("--format csv"));
    o.format = "auto";
    write_text(dir / "z.gz", std::string("\x1f\x8b\x08\x00", 4));
    o.inputs = {dir / "z.gz"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("z.gz") && Catch::Contains("gzip"));
    // zstd (the usual .jsonl.zst of pre-training corpora), xz, bzip2: refused naming the tool to stream them.
    write_text(dir / "c.jsonl.zst", std::string("\x28\xb5\x2f\xfd\x04\x00", 6));
    o.inputs = {dir / "c.jsonl.zst"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("zstd-compressed") && Catch::Contains("zstdcat"));
    write_text(dir / "c.xz", std::string("\xfd" "7zXZ\x00", 6));
    o.inputs = {dir / "c.xz"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("xz-compressed"));
    write_text(dir / "c.bz2", std::string("BZh91AY&SY", 10));
    o.inputs = {dir / "c.bz2"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("bzip2-compressed"));
    o.inputs = {dir.path().string()};
    REQUIRE_THROWS_AS(prepare_dataset(o), InputError);
    REQUIRE_FALSE(fs::exists(o.output_prefix + ".idx"));
  }
}

TEST_CASE("input formats: JSONL by extension in any case; text that starts like bzip2's magic is text") {
  TempDir dir("prepare_formats");
  PrepareOptions o;
  o.output_prefix = dir / "ds";
  write_text(dir / "UPPER.JSONL", "{\"text\": \"one\"}\n");
  o.inputs = {dir / "UPPER.JSONL"};
  prepare_dataset(o);
  CHECK(read_documents(o.output_prefix) == std::vector<std::string>{"one"});
  write_text(dir / "bz.txt", "BZh is no compression\n");
  o.inputs = {dir / "bz.txt"};
  prepare_dataset(o);
  CHECK(read_documents(o.output_prefix) == std::vector<std::string>{"BZh is no compression\n"});
}

TEST_CASE("prepare reads a pipe once and never overwrites its input or an old dataset's records") {
  TempDir dir("prepare_io");
  PrepareOptions o;
  o.output_prefix = dir / "ds";
  SECTION("a pipe's first bytes reach the dataset (`zcat x.gz | ... --input /dev/stdin`)") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const std::string text = "hello world, this is a text document\n";
    REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fds[1]);  // the reader sees the text, then end of file
    o.inputs = {fmt::format("/proc/self/fd/{}", fds[0])};
    prepare_dataset(o);
    ::close(fds[0]);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{text});
  }
  SECTION("an input that is one of the outputs is refused, and left as it was") {
    write_text(dir / "ds.bin", "not a dataset: the user's own file\n");
    o.inputs = {dir / "ds.bin"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("--input " + dir / "ds.bin") &&
                                                Catch::Contains("is also an output of --output-prefix"));
    std::ifstream in(dir / "ds.bin");
    REQUIRE(std::string(std::istreambuf_iterator<char>(in), {}) == "not a dataset: the user's own file\n");
    o.output_prefix = dir / "sub/";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("names a directory"));
  }
  SECTION("a failed prepare over a dataset keeps the records that describe it") {
    write_text(dir / "good.jsonl", "{\"text\": \"hello world\"}\n");
    o.inputs = {dir / "good.jsonl"};
    prepare_dataset(o);
    for (const char* ext : {".tokenizer.json", ".stats.json"}) REQUIRE(fs::exists(o.output_prefix + ext));
    write_text(dir / "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"\n");
    o.inputs = {dir / "bad.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("bad.jsonl:2"));
    for (const char* ext : {".tokenizer.json", ".stats.json"}) REQUIRE(fs::exists(o.output_prefix + ext));
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"hello world"});
  }
  SECTION("a prefix another prepare is writing is refused, and its dataset left as it was") {
    write_text(dir / "good.jsonl", "{\"text\": \"hello world\"}\n");
    o.inputs = {dir / "good.jsonl"};
    prepare_dataset(o);
    CHECK(!fs::exists(o.output_prefix + ".lock"));  // removed when the prepare ends
    const int held = ::open((o.output_prefix + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(::flock(held, LOCK_EX) == 0);  // as a running prepare holds it
    write_text(dir / "other.jsonl", "{\"text\": \"other\"}\n");
    o.inputs = {dir / "other.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("another `lattice data prepare` is writing it"));
    ::close(held);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"hello world"});
    prepare_dataset(o);  // the holder is gone: the lock is free again
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"other"});
  }
  SECTION("a tokenizer file that is a pipe is refused before anything is written (the record copies it)") {
    write_text(dir / "good.jsonl", "{\"text\": \"hello world\"}\n");
    o.inputs = {dir / "good.jsonl"};
    prepare_dataset(o);
    REQUIRE(::mkfifo((dir / "vocab.fifo").c_str(), 0600) == 0);
    write_text(dir / "merges.txt", "#version: 0.2\n");
    o.tokenizer = TokenizerOptions{"gpt2-bpe", dir / "vocab.fifo", dir / "merges.txt", "", ""};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("--vocab-file '" + dir / "vocab.fifo" +
                                                            "' is not a regular file"));
    o.tokenizer.vocab_file = dir / "missing.json";
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("--vocab-file '" + dir / "missing.json" +
                                                            "' does not exist"));
    for (const char* ext : {".tokenizer.json", ".stats.json"}) REQUIRE(fs::exists(o.output_prefix + ext));
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"hello world"});
  }
}

TEST_CASE("options no input uses, and an input given twice, are warned about") {
  TempDir dir("prepare_warnings");
  PrepareOptions o;
  o.output_prefix = dir / "ds";
  write_text(dir / "a.jsonl", "{\"text\": \"one\"}\n");
  write_text(dir / "b.txt", "two\n");
  const auto log_of = [&](const PrepareOptions& options) {
    return lattice::testing::captured_log([&] { prepare_dataset(options); });
  };
  o.inputs = {dir / "a.jsonl", dir / "b.txt"};
  CHECK_THAT(log_of(o), !Catch::Contains("[warning]"));
  o.inputs = {dir / "a.jsonl"};
  o.text_document_separator = "percent-line";
  CHECK_THAT(log_of(o), Catch::Contains("--text-document-separator percent-line has no effect"));
  o.text_document_separator = "file";
  o.inputs = {dir / "b.txt"};
  o.json_key = "content";
  CHECK_THAT(log_of(o), Catch::Contains("--json-key content has no effect"));
  o.json_key = "text";
  o.json_key_given = true;  // the default, given explicitly: a user who expected JSONL
  CHECK_THAT(log_of(o), Catch::Contains("--json-key text has no effect"));
  o.json_key_given = false;
  o.inputs = {dir / "a.jsonl"};
  o.separator_given = true;
  CHECK_THAT(log_of(o), Catch::Contains("--text-document-separator file has no effect"));
  o.separator_given = false;
  o.inputs = {dir / "b.txt", dir / "a.jsonl", dir.path().string() + "/./b.txt"};
  CHECK_THAT(log_of(o), Catch::Contains("is the same file as --input " + dir / "b.txt"));
  REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"two\n", "one", "two\n"});
}

TEST_CASE("prepare JSONL") {
  TempDir dir("prepare_jsonl");
  PrepareOptions o;
  o.output_prefix = dir / "ds";
  SECTION("one document per line, from the --json-key field") {
    write_text(dir / "a.jsonl",
               "{\"text\": \"hello\", \"id\": 1}\n"
               "\n"
               "{\"text\": \"\"}\n"
               "{\"text\": \"caf\\u00e9\\nline\", \"meta\": {\"x\": [1,2]}}\r\n"
               "{\"id\": 3, \"text\": \"no newline at end\"}");
    o.inputs = {dir / "a.jsonl"};
    o.skip_empty_documents = true;
    PrepareSummary s = prepare_dataset(o);
    REQUIRE(read_documents(o.output_prefix) ==
            std::vector<std::string>{"hello", "caf\xc3\xa9\nline", "no newline at end"});
    REQUIRE(s.empty_documents == 1);
    REQUIRE(s.documents == 3);
  }
  SECTION("input with no documents at all is an error, as for text; nothing is written") {
    write_text(dir / "none.jsonl", "");
    o.inputs = {dir / "none.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("holds no documents") && Catch::Contains("none.jsonl"));
    write_text(dir / "blank.jsonl", "{\"text\": \" \"}\n");
    o.inputs = {dir / "blank.jsonl"};
    o.skip_empty_documents = true;
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains("1 empty or whitespace-only, skipped"));
    REQUIRE_FALSE(fs::exists(o.output_prefix + ".idx"));
  }
  SECTION("an empty JSONL document is an error naming file and line") {
    write_text(dir / "e.jsonl", "{\"text\": \"a\"}\n\n{\"text\": \" \\n\"}\n{\"text\": \"b\"}\n");
    o.inputs = {dir / "e.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "e.jsonl:3") && Catch::Contains("empty"));
    REQUIRE_FALSE(fs::exists(o.output_prefix + ".idx"));
  }
  SECTION("invalid UTF-8 in a JSON line names file, line and byte offset") {
    write_text(dir / "u.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"bad \xff here\"}\n");
    o.inputs = {dir / "u.jsonl"};
    // JSON text is UTF-8 whatever the tokenizer: no advice to switch to the byte tokenizer.
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "u.jsonl:2") && Catch::Contains("byte offset 29") &&
                                                Catch::Contains("UTF-8") && !Catch::Contains("--tokenizer byte"));
    REQUIRE_FALSE(fs::exists(o.output_prefix + ".idx"));
  }
  SECTION("--json-key and --format jsonl") {
    write_text(dir / "b.txt", "{\"content\": \"x\"}\n{\"content\": \"yz\"}\n");
    o.inputs = {dir / "b.txt"};
    o.format = "jsonl";
    o.json_key = "content";
    prepare_dataset(o);
    REQUIRE(read_documents(o.output_prefix) == std::vector<std::string>{"x", "yz"});
  }
  SECTION("a bad line is an error naming file and line, and leaves no files") {
    write_text(dir / "bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"text\": \"broken\n{\"text\": \"ok\"}\n");
    o.inputs = {dir / "bad.jsonl"};
    REQUIRE_THROWS_AS(prepare_dataset(o), InputError);
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "bad.jsonl:3") && Catch::Contains("line 3") &&
                                                Catch::Contains("not valid JSON"));
    REQUIRE(fs::is_empty(dir.path()) == false);  // the input is still there
    for (const char* ext : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) REQUIRE_FALSE(fs::exists(o.output_prefix + ext));
  }
  SECTION("missing key, wrong type, not an object") {
    write_text(dir / "k.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\", \"title\": \"t\"}\n");
    o.inputs = {dir / "k.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "k.jsonl:2") && Catch::Contains("no \"text\" field") &&
                                                Catch::Contains("body, title"));
    write_text(dir / "t.jsonl", "{\"text\": 5}\n");
    o.inputs = {dir / "t.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "t.jsonl:1") && Catch::Contains("not a string"));
    write_text(dir / "o.jsonl", "[1, 2]\n");
    o.inputs = {dir / "o.jsonl"};
    REQUIRE_THROWS_WITH(prepare_dataset(o), Catch::Contains(dir / "o.jsonl:1") && Catch::Contains("not an object"));
  }
}
