// make_tokenizer with bad options and malformed files: each is an InputError that names the
// flag or the file and, inside a tokenizer.json, the JSON path.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "kernels/error.h"
#include "tests/input_error_testing.h"
#include "tests/log_capture.h"

using namespace lattice;
using testing::require_input_error;
using testing::temp_path;
using testing::write_temp_file;
using nlohmann::json;

namespace {

// A small valid byte-level tokenizer.json: the 256 byte characters, a few merges, <|endoftext|>.
json valid_spec() {
  json vocab = json::object();
  // GPT-2 byte-level characters for "a", "b", "c", " " (Ġ) are enough for these tests.
  vocab["a"] = 0;
  vocab["b"] = 1;
  vocab["c"] = 2;
  vocab["\u0120"] = 3;
  vocab["ab"] = 4;
  vocab["abc"] = 5;
  vocab["\u0120ab"] = 6;
  vocab["<|endoftext|>"] = 7;
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({json{{"id", 7}, {"content", "<|endoftext|>"}, {"single_word", false},
                                         {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                         {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                             {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", json{{"type", "ByteLevel"}}},
      {"model", json{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                     {"vocab", vocab},
                     {"merges", json::array({json::array({"a", "b"}), "ab c", json::array({"\u0120", "ab"})})}}}};
}

std::unique_ptr<Tokenizer> load(const json& spec, const std::string& name) {
  return make_tokenizer(TokenizerOptions{"hf", "", "", write_temp_file(name, spec.dump()), ""});
}

}  // namespace

TEST_CASE("the small valid tokenizer.json works") {
  auto tok = load(valid_spec(), "valid.json");
  CHECK(tok->vocab_size() == 8);
  CHECK(tok->eod_id() == 7);
  CHECK(tok->encode("abc ab<|endoftext|>ab") == std::vector<int32_t>{5, 6, 7, 4});
  CHECK(tok->decode(std::vector<int32_t>{5, 6, 7, 4}) == "abc ab<|endoftext|>ab");
  CHECK_THROWS_AS(tok->decode(std::vector<int32_t>{8}), Error);
}

TEST_CASE("a post_processor template's special tokens go around every document, as HF adds them") {
  json spec = valid_spec();
  CHECK(load(spec, "no_template.json")->document_prefix().empty());
  // Llama 3's form: ByteLevel, then a template putting <|begin_of_text|> (here <|endoftext|>, id 7)
  // before $A; a suffix after it.
  const auto special = [](const char* name) { return json{{"SpecialToken", {{"id", name}, {"type_id", 0}}}}; };
  spec["post_processor"] = json{
      {"type", "Sequence"},
      {"processors",
       json::array({json{{"type", "ByteLevel"}, {"trim_offsets", false}},
                    json{{"type", "TemplateProcessing"},
                         {"single", json::array({special("<|endoftext|>"), json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                                 special("ab")})},
                         {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {7}},
                                                                {"tokens", {"<|endoftext|>"}}}}}}}})}};
  auto tok = std::unique_ptr<Tokenizer>();
  const std::string log = lattice::testing::captured_log([&] { tok = load(spec, "template.json"); });
  CHECK_THAT(log, Catch::Contains("every document gets <|endoftext|> and ab around it"));
  CHECK(tok->document_prefix() == std::vector<int32_t>{7});
  CHECK(tok->document_suffix() == std::vector<int32_t>{4});  // "ab", looked up by name
  CHECK(tok->encode("ab") == std::vector<int32_t>{4});         // encode itself adds nothing
  // A special token the tokenizer does not have: an error naming the path.
  spec["post_processor"]["processors"][1]["single"][2] = special("<nope>");
  require_input_error([&] { load(spec, "bad_template.json"); },
                      {"post_processor.processors[1].single", "\"<nope>\" is not a token"});
}

TEST_CASE("malformed or unsupported tokenizer.json is an InputError naming the file and JSON path") {
  SECTION("invalid JSON") {
    std::string p = write_temp_file("bad.json", "{\"model\": {\"type\": \"BPE\",");
    require_input_error([&] { make_tokenizer(TokenizerOptions{"hf", "", "", p, ""}); }, {p, "invalid JSON"});
  }
  SECTION("missing file") {
    require_input_error([&] { make_tokenizer(TokenizerOptions{"hf", "", "", temp_path("nope.json"), ""}); },
                        {"nope.json", "cannot open"});
  }
  SECTION("unsupported model type") {
    for (const char* type : {"WordPiece", "Unigram"}) {
      json s = valid_spec();
      s["model"]["type"] = type;
      require_input_error([&] { load(s, "type.json"); }, {"type.json", "model.type", type});
    }
  }
  SECTION("missing merges / vocab") {
    json s = valid_spec();
    s["model"].erase("merges");
    require_input_error([&] { load(s, "nomerges.json"); }, {"nomerges.json", "model.merges", "missing"});
    s = valid_spec();
    s["model"].erase("vocab");
    require_input_error([&] { load(s, "novocab.json"); }, {"novocab.json", "model.vocab", "missing"});
  }
  SECTION("a merge with an unknown token, or malformed") {
    json s = valid_spec();
    s["model"]["merges"].push_back("a zz");
    require_input_error([&] { load(s, "badmerge.json"); }, {"badmerge.json", "model.merges[3]", "zz"});
    s = valid_spec();
    s["model"]["merges"].push_back("b c");  // "bc" not in the vocabulary
    require_input_error([&] { load(s, "badmerge2.json"); }, {"model.merges[3]", "\"bc\""});
    s = valid_spec();
    s["model"]["merges"].push_back(42);
    require_input_error([&] { load(s, "badmerge3.json"); }, {"badmerge3.json", "model.merges[3]"});
  }
  SECTION("an unk_token outside the vocabulary") {
    json s = valid_spec();
    s["model"]["unk_token"] = "<unk>";
    require_input_error([&] { load(s, "unk.json"); }, {"unk.json", "model.unk_token", "<unk>"});
  }
  SECTION("a vocabulary id that is not an integer") {
    json s = valid_spec();
    s["model"]["vocab"]["c"] = "two";
    require_input_error([&] { load(s, "badid.json"); }, {"badid.json", "model.vocab[\"c\"]"});
  }
  SECTION("unsupported normalizer, pre_tokenizer, decoder") {
    json s = valid_spec();
    s["normalizer"] = json{{"type", "NFC"}};
    require_input_error([&] { load(s, "nfc.json"); }, {"nfc.json", "unsupported normalizer \"NFC\""});
    s = valid_spec();
    s["pre_tokenizer"] = json{{"type", "Whitespace"}};
    require_input_error([&] { load(s, "ws.json"); }, {"ws.json", "pre_tokenizer", "Whitespace"});
    s = valid_spec();
    s["pre_tokenizer"] = nullptr;
    require_input_error([&] { load(s, "nopre.json"); }, {"nopre.json", "pre_tokenizer"});
    s = valid_spec();
    s["pre_tokenizer"] = json{{"type", "Sequence"}, {"pretokenizers", json::array({
        json{{"type", "Split"}, {"pattern", json{{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
        json{{"type", "ByteLevel"}, {"use_regex", false}}})}};
    require_input_error([&] { load(s, "regex.json"); }, {"regex.json", "pre_tokenizer.pretokenizers[0].pattern"});
    s = valid_spec();
    s["decoder"] = json{{"type", "WordPiece"}};
    require_input_error([&] { load(s, "dec.json"); }, {"dec.json", "decoder"});
  }
  SECTION("no end-of-document token") {
    json s = valid_spec();
    s["added_tokens"] = json::array();
    s["model"]["vocab"].erase("<|endoftext|>");
    require_input_error([&] { load(s, "noeod.json"); }, {"noeod.json", "--eod-token"});
    require_input_error(
        [&] { make_tokenizer(TokenizerOptions{"hf", "", "", write_temp_file("eod.json", valid_spec().dump()), "</s>"}); },
        {"eod.json", "</s>"});
  }
}

TEST_CASE("bad tokenizer options name the flag") {
  require_input_error([] { make_tokenizer(TokenizerOptions{"sentencepiece", "", "", "", ""}); },
                      {"--tokenizer sentencepiece", "byte, gpt2-bpe, hf"});
  require_input_error([] { make_tokenizer(TokenizerOptions{"gpt2-bpe", "", "", "", ""}); }, {"--vocab-file"});
  require_input_error([] { make_tokenizer(TokenizerOptions{"hf", "", "", "", ""}); }, {"--tokenizer-file"});
  require_input_error([] { make_tokenizer(TokenizerOptions{"byte", "", "", "", "<|x|>"}); }, {"--eod-token"});
  CHECK(make_tokenizer(TokenizerOptions{})->name() == "byte");
  CHECK(make_tokenizer(TokenizerOptions{})->eod_id() == 256);
}

TEST_CASE("bad GPT-2 files name the file") {
  std::string vocab = write_temp_file("vocab.json", R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})");
  std::string merges = write_temp_file("merges.txt", "#version: 0.2\na b\n");
  auto tok = make_tokenizer(TokenizerOptions{"gpt2-bpe", vocab, merges, "", ""});
  CHECK(tok->encode("abab") == std::vector<int32_t>{2, 2});
  CHECK(tok->eod_id() == 3);
  std::string bad_merges = write_temp_file("bad_merges.txt", "#version: 0.2\na b\nab\n");
  require_input_error([&] { make_tokenizer(TokenizerOptions{"gpt2-bpe", vocab, bad_merges, "", ""}); },
                      {"bad_merges.txt", "line 3"});
  std::string unknown = write_temp_file("unknown_merges.txt", "a q\n");
  require_input_error([&] { make_tokenizer(TokenizerOptions{"gpt2-bpe", vocab, unknown, "", ""}); },
                      {"unknown_merges.txt", "[0]", "\"q\""});
  std::string bad_vocab = write_temp_file("bad_vocab.json", "[1, 2");
  require_input_error([&] { make_tokenizer(TokenizerOptions{"gpt2-bpe", bad_vocab, merges, "", ""}); },
                      {"bad_vocab.json", "invalid JSON"});
}

TEST_CASE("a tokenizer made from texts already read does not read its files again") {
  // data prepare reads the files once and copies those bytes into the record: the tokenizer must be
  // built from the same bytes, whatever happens to the files meanwhile.
  const std::string vocab = temp_path("gone_vocab.json"), merges = temp_path("gone_merges.txt");
  const TokenizerFileTexts texts = {{vocab, R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})"},
                                    {merges, "#version: 0.2\na b\n"}};
  auto tok = make_tokenizer(TokenizerOptions{"gpt2-bpe", vocab, merges, "", ""}, &texts);
  CHECK(tok->encode("abab") == std::vector<int32_t>{2, 2});
  require_input_error([&] { make_tokenizer(TokenizerOptions{"gpt2-bpe", vocab, merges, "", ""}); },
                      {"gone_vocab.json", "cannot open"});
}
