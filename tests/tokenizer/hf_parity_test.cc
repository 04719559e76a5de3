// Our byte-level BPE tokenizers against the Hugging Face `tokenizers` library: make_reference.py
// trains GPT-2 and Llama-3 style tokenizers on a ~1 MB multilingual corpus and writes HF's ids;
// every document must encode to the same ids, and decode(encode(x)) must give x back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "kernels/error.h"

namespace fs = std::filesystem;
using namespace lattice;

namespace {

std::string script_path() {
  for (const char* c : {"tests/tokenizer/make_reference.py", "lattice/tests/tokenizer/make_reference.py"}) {
    if (fs::exists(c)) return c;
  }
  if (const char* src = std::getenv("TEST_SRCDIR")) {
    std::string p = std::string(src) + "/lattice/tests/tokenizer/make_reference.py";
    if (fs::exists(p)) return p;
  }
  FAIL("make_reference.py not found from cwd " << fs::current_path());
  return "";
}

// Runs make_reference.py once per test process; returns its output directory.
const std::string& reference_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string d = (fs::path(tmp ? tmp : fs::temp_directory_path().string()) / "tokenizer_reference").string();
    fs::remove_all(d);
    std::string cmd = "python3 " + script_path() + " " + d;
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      FAIL("`" << cmd << "` failed (exit status " << rc << "). If python3 cannot import tokenizers, run "
           "tools/install_deps.sh (it installs the `tokenizers` package) and then the README's test "
           "command again.");
    }
    return d;
  }();
  return dir;
}

std::vector<std::string> read_corpus() {
  std::ifstream f(reference_dir() + "/corpus.jsonl");
  std::vector<std::string> docs;
  std::string line;
  while (std::getline(f, line)) docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  REQUIRE(docs.size() > 100);
  return docs;
}

std::vector<std::vector<int32_t>> read_expected(const std::string& name) {
  std::ifstream f(reference_dir() + "/expected_" + name + ".jsonl");
  REQUIRE(f.good());
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line).get<std::vector<int32_t>>());
  return out;
}

// Text as a JSON string literal (invalid UTF-8 replaced), for messages.
std::string quote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string show(const std::vector<int32_t>& ids, size_t at) {
  size_t a = at > 8 ? at - 8 : 0, b = std::min(ids.size(), at + 8);
  std::string s = fmt::format("[{}..{}) of {}:", a, b, ids.size());
  for (size_t i = a; i < b; ++i) s += i == at ? fmt::format(" >{}<", ids[i]) : fmt::format(" {}", ids[i]);
  return s;
}

// Encodes every document and requires HF's ids (and, if round_trip, decode(encode(x)) == x);
// returns our encode time in seconds.
double check_parity(const Tokenizer& tok, const std::string& expected_name, bool round_trip = true) {
  auto docs = read_corpus();
  auto expected = read_expected(expected_name);
  REQUIRE(expected.size() == docs.size());
  size_t bytes = 0, mismatches = 0;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int32_t>> got(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    got[d] = tok.encode(docs[d]);
    bytes += docs[d].size();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t d = 0; d < docs.size(); ++d) {
    if (got[d] == expected[d]) continue;
    size_t at = 0;
    while (at < got[d].size() && at < expected[d].size() && got[d][at] == expected[d][at]) ++at;
    if (++mismatches <= 5) {
      UNSCOPED_INFO(fmt::format("{}: document {} differs at token {}\n  text: {}\n  ours: {}\n  HF:   {}",
                                expected_name, d, at, quote(docs[d].substr(0, 300)),
                                show(got[d], at), show(expected[d], at)));
    }
  }
  CHECK(mismatches == 0);
  WARN(fmt::format("{} ({}): {} documents, {:.2f} MB, single thread {:.3f} s = {:.1f} MB/s", expected_name,
                   tok.name(), docs.size(), bytes / 1e6, secs, bytes / 1e6 / secs));
  if (!round_trip) return secs;
  size_t bad = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (tok.decode(got[d]) != docs[d] && ++bad <= 3) {
      UNSCOPED_INFO("round trip fails for document " << d << ": " << quote(docs[d].substr(0, 200)));
    }
  }
  CHECK(bad == 0);
  return secs;
}

}  // namespace

// gpt2-bpe is Megatron-LM's GPT2BPETokenizer: the end-of-document text inside a document is encoded
// as text (HF's GPT2TokenizerFast would give the special id), so that a dataset prepared here equals
// one Megatron's tools/preprocess_data.py prepares.
TEST_CASE("gpt2-bpe from vocab.json + merges.txt matches Megatron-LM's GPT-2 BPE (HF's without added tokens)") {
  const std::string& d = reference_dir();
  auto tok = make_tokenizer(TokenizerOptions{"gpt2-bpe", d + "/gpt2/vocab.json", d + "/gpt2/merges.txt", "", ""});
  CHECK(tok->name() == "gpt2-bpe");
  CHECK(tok->vocab_size() == 3000);
  CHECK(tok->decode(std::vector<int32_t>{tok->eod_id()}) == "<|endoftext|>");
  const std::vector<int32_t> in_text = tok->encode("a <|endoftext|> b");
  CHECK(std::find(in_text.begin(), in_text.end(), tok->eod_id()) == in_text.end());
  check_parity(*tok, "gpt2_megatron");
}

TEST_CASE("hf tokenizer.json, GPT-2 style (ByteLevel, merges as lists) matches Hugging Face") {
  auto tok = make_tokenizer(TokenizerOptions{"hf", "", "", reference_dir() + "/gpt2/tokenizer.json", ""});
  CHECK(tok->decode(std::vector<int32_t>{tok->eod_id()}) == "<|endoftext|>");
  check_parity(*tok, "gpt2");
}

TEST_CASE("hf tokenizer.json, ByteLevel(add_prefix_space), merges as \"a b\" strings, matches Hugging Face") {
  auto tok = make_tokenizer(TokenizerOptions{"hf", "", "", reference_dir() + "/gpt2_prefix.json", ""});
  check_parity(*tok, "gpt2_prefix", /*round_trip=*/false);  // decode keeps the added prefix spaces
  CHECK(tok->decode(tok->encode("a<|endoftext|>b")) == " a<|endoftext|> b");
}

TEST_CASE("hf tokenizer.json, Llama-3 style (Split + ByteLevel, ignore_merges) matches Hugging Face") {
  auto tok = make_tokenizer(TokenizerOptions{"hf", "", "", reference_dir() + "/llama3.json", ""});
  CHECK(tok->decode(std::vector<int32_t>{tok->eod_id()}) == "<|end_of_text|>");
  auto eot = make_tokenizer(TokenizerOptions{"hf", "", "", reference_dir() + "/llama3.json", "<|eot_id|>"});
  CHECK(eot->decode(std::vector<int32_t>{eot->eod_id()}) == "<|eot_id|>");
  check_parity(*tok, "llama3");
}

TEST_CASE("encode is thread-safe: two threads give the single-thread ids") {
  auto tok = make_tokenizer(TokenizerOptions{"hf", "", "", reference_dir() + "/llama3.json", ""});
  auto docs = read_corpus();
  auto expected = read_expected("llama3");
  std::vector<std::vector<int32_t>> got(docs.size());
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (size_t d = t; d < docs.size(); d += 2) got[d] = tok->encode(docs[d]);
    });
  }
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t bad = 0;
  for (size_t d = 0; d < docs.size(); ++d) bad += got[d] != expected[d];
  CHECK(bad == 0);
  WARN(fmt::format("llama3 on 2 threads: {:.3f} s", secs));
}

TEST_CASE("invalid UTF-8 input is an InputError naming the byte offset") {
  auto tok = make_tokenizer(TokenizerOptions{"gpt2-bpe", reference_dir() + "/gpt2/vocab.json",
                                             reference_dir() + "/gpt2/merges.txt", "", ""});
  for (auto [text, offset] : std::vector<std::pair<std::string, int>>{
           {"hello \xff world", 6},
           {"abcdefghijkl\xc3", 12},             // truncated sequence at the end
           {"ok \xc0\xaf", 3},                   // overlong
           {"x\xed\xa0\x80y", 1},                // surrogate
           {"caf\xc3\xa9 \xf4\x90\x80\x80", 6}}) {  // above U+10FFFF
    INFO(quote(text));
    try {
      tok->encode(text);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains(fmt::format("invalid UTF-8 at byte offset {}", offset)));
    }
  }
  CHECK(tok->decode(tok->encode("caf\xc3\xa9")) == "caf\xc3\xa9");
}
