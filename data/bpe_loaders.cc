// Loading GPT-2 vocab.json + merges.txt and Hugging Face tokenizer.json into a BpeTokenizer.
#include "data/bpe_loaders.h"

#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "kernels/error.h"

namespace lattice {

namespace {

using nlohmann::json;

std::string file_text(const std::string& path, const std::string& what, const TokenizerFileTexts* texts) {
  if (texts != nullptr) {
    if (auto it = texts->find(path); it != texts->end()) return it->second;
  }
  return read_whole_file(path, what);
}

json parse_json(const std::string& path, const std::string& what, const TokenizerFileTexts* texts) {
  const std::string text = file_text(path, what, texts);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number such as 1e999
    throw InputError(fmt::format("{} {}: invalid JSON: {}", what, path, e.what()));
  }
}

// Reads typed fields of a JSON document and names the file and JSON path in every error.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw InputError(fmt::format("tokenizer file {}: {}: {}", file_, path, message));
  }
  const json& object(const json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, found {}", j.type_name()));
    return j;
  }
  const json& array(const json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, fmt::format("expected an array, found {}", j.type_name()));
    return j;
  }
  std::string string(const json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, fmt::format("expected a string, found {}", j.type_name()));
    return j.get<std::string>();
  }
  // Optional field of an object: default if absent or null.
  bool flag(const json& obj, const char* key, const std::string& path, bool def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) fail(path + "." + key, fmt::format("expected true or false, found {}", it->type_name()));
    return it->get<bool>();
  }
  int32_t id(const json& j, const std::string& path) const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > INT32_MAX) {
      fail(path, fmt::format("expected a token id (integer in [0, 2^31)), found {}", j.dump()));
    }
    return static_cast<int32_t>(j.get<int64_t>());
  }
  std::string type_of(const json& obj, const std::string& path) const {
    auto it = obj.find("type");
    if (it == obj.end()) fail(path, "missing \"type\"");
    return string(*it, path + ".type");
  }

 private:
  std::string file_;
};

std::unordered_map<std::string, int32_t> read_vocab(const Reader& r, const json& j,
                                                    const std::string& path) {
  r.object(j, path);
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    vocab.emplace(it.key(), r.id(it.value(), fmt::format("{}[{:?}]", path, it.key())));
  }
  if (vocab.empty()) r.fail(path, "the vocabulary is empty");
  return vocab;
}

SplitBehavior read_behavior(const Reader& r, const json& j, const std::string& path) {
  std::string b = r.string(j, path);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  r.fail(path, fmt::format("unknown split behavior {:?} (known: Removed, Isolated, "
                           "MergedWithPrevious, MergedWithNext, Contiguous)", b));
}

// Adds one pre-tokenizer (not a Sequence) to `pre`; returns true if it was ByteLevel.
bool add_pre_tokenizer(const Reader& r, const json& j, const std::string& path, PreTokenizer& pre,
                       const std::string& file) {
  r.object(j, path);
  std::string type = r.type_of(j, path);
  if (type == "ByteLevel") {
    pre.add_byte_level(r.flag(j, "add_prefix_space", path, true), r.flag(j, "use_regex", path, true));
    return true;
  }
  if (type == "Split") {
    auto pat = j.find("pattern");
    if (pat == j.end()) r.fail(path, "Split without \"pattern\"");
    r.object(*pat, path + ".pattern");
    std::string pattern;
    bool literal;
    if (pat->contains("Regex")) {
      pattern = r.string((*pat)["Regex"], path + ".pattern.Regex");
      literal = false;
    } else if (pat->contains("String")) {
      pattern = r.string((*pat)["String"], path + ".pattern.String");
      literal = true;
    } else {
      r.fail(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    auto beh = j.find("behavior");
    if (beh == j.end()) r.fail(path, "Split without \"behavior\"");
    SplitBehavior behavior = read_behavior(r, *beh, path + ".behavior");
    auto regex = std::make_shared<const Regex>(pattern, literal,
                                               fmt::format("tokenizer file {}: {}.pattern", file, path));
    pre.add_split(std::move(regex), behavior, r.flag(j, "invert", path, false));
    return false;
  }
  r.fail(path, fmt::format("unsupported pre_tokenizer {:?} (supported: ByteLevel, Split, Sequence "
                           "of Split + ByteLevel)", type));
}

}  // namespace

std::unique_ptr<BpeTokenizer> load_gpt2_bpe(const std::string& vocab_file,
                                            const std::string& merges_file,
                                            const std::string& eod_token,
                                            const TokenizerFileTexts* texts) {
  Reader rv(vocab_file);
  auto vocab = read_vocab(rv, parse_json(vocab_file, "--vocab-file", texts), "(root)");
  std::string text = file_text(merges_file, "--merges-file", texts);
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream lines(text);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos) {
      throw InputError(fmt::format("--merges-file {}: line {}: expected two tokens separated by one "
                                   "space, found {:?}", merges_file, line_no, line));
    }
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  std::string eod = eod_token.empty() ? "<|endoftext|>" : eod_token;
  auto it = vocab.find(eod);
  if (it == vocab.end()) {
    throw InputError(fmt::format("--vocab-file {}: the end-of-document token {:?} is not in the "
                                 "vocabulary; name one with --eod-token", vocab_file, eod));
  }
  // No added tokens: as Megatron-LM's GPT2BPETokenizer (regex + BPE), the end-of-document text inside
  // a document is encoded as text; only the id ending each document is the end-of-document token.
  std::vector<AddedToken> added;
  auto model = std::make_unique<BpeModel>(std::move(vocab), merges, BpeModel::Options{},
                                          fmt::format("--merges-file {}: merges", merges_file));
  PreTokenizer pre;
  pre.add_byte_level(false, true);
  try {
    return std::make_unique<BpeTokenizer>("gpt2-bpe", std::move(model), std::move(pre),
                                          std::move(added), eod);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--vocab-file {}: {}", vocab_file, e.what()));
  }
}

namespace {

// post_processor: what Hugging Face adds around a sequence with add_special_tokens (its default, and
// Megatron-LM's HuggingFaceTokenizer's): a TemplateProcessing's "single" template, alone or in a
// Sequence (its ByteLevel part changes no id). Its special tokens before $A go before every
// document, those after it after the document (before the end-of-document token).
void apply_document_template(Reader& r, const json& root, BpeTokenizer& tokenizer, const std::string& file) {
  auto pp = root.find("post_processor");
  if (pp == root.end() || pp->is_null()) return;
  r.object(*pp, "post_processor");
  const json* tmpl = nullptr;
  std::string path = "post_processor";
  if (pp->value("type", "") == "TemplateProcessing") {
    tmpl = &*pp;
  } else if (pp->value("type", "") == "Sequence" && pp->contains("processors") && (*pp)["processors"].is_array()) {
    for (size_t i = 0; i < (*pp)["processors"].size(); ++i)
      if ((*pp)["processors"][i].is_object() && (*pp)["processors"][i].value("type", "") == "TemplateProcessing") {
        tmpl = &(*pp)["processors"][i];
        path = fmt::format("post_processor.processors[{}]", i);
      }
  }
  if (tmpl == nullptr) return;
  if (!tmpl->contains("single")) return;
  r.array((*tmpl)["single"], path + ".single");
  std::vector<int32_t> prefix, suffix;
  std::vector<std::string> names;
  bool seen_sequence = false;
  for (const json& item : (*tmpl)["single"]) {
    if (item.is_object() && item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object())
      r.fail(path + ".single", fmt::format("an item that is neither a Sequence nor a SpecialToken: {}", item.dump()));
    const std::string name = item["SpecialToken"].value("id", "");
    // The ids: the template's own special_tokens table, else the token of that name.
    std::vector<int32_t> ids;
    const json& table = tmpl->value("special_tokens", json::object());
    if (table.contains(name) && table[name].contains("ids") && table[name]["ids"].is_array()) {
      for (const json& id : table[name]["ids"]) ids.push_back(id.get<int32_t>());
    } else if (const auto id = tokenizer.token_to_id(name)) {
      ids.push_back(*id);
    } else {
      r.fail(path + ".single", fmt::format("special token {:?} is not a token of the tokenizer", name));
    }
    (seen_sequence ? suffix : prefix).insert((seen_sequence ? suffix : prefix).end(), ids.begin(), ids.end());
    names.push_back(name);
  }
  if (names.empty()) return;
  spdlog::info("{}: every document gets {} around it (its post_processor template), as Hugging Face and "
               "Megatron-LM's HuggingFaceTokenizer add them",
               file, fmt::join(names, " and "));
  tokenizer.set_document_template(std::move(prefix), std::move(suffix));
}

}  // namespace

std::unique_ptr<BpeTokenizer> load_hf_tokenizer(const std::string& tokenizer_file,
                                                const std::string& eod_token,
                                                const TokenizerFileTexts* texts) {
  const json root = parse_json(tokenizer_file, "--tokenizer-file", texts);
  Reader r(tokenizer_file);
  r.object(root, "(root)");

  // normalizer: none supported (null, or an empty Sequence).
  if (auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
    r.object(*n, "normalizer");
    std::string type = r.type_of(*n, "normalizer");
    bool empty_sequence = type == "Sequence" && n->contains("normalizers") &&
                          (*n)["normalizers"].is_array() && (*n)["normalizers"].empty();
    if (!empty_sequence) {
      r.fail("normalizer", fmt::format("unsupported normalizer {:?} (only null is supported)", type));
    }
  }

  // pre_tokenizer: ByteLevel, or a Sequence of Splits ending in ByteLevel.
  PreTokenizer pre;
  {
    auto p = root.find("pre_tokenizer");
    if (p == root.end() || p->is_null()) {
      r.fail("pre_tokenizer", "missing: only byte-level BPE is supported (a ByteLevel pre_tokenizer)");
    }
    r.object(*p, "pre_tokenizer");
    std::string type = r.type_of(*p, "pre_tokenizer");
    bool byte_level_last = false;
    if (type == "Sequence") {
      auto seq = p->find("pretokenizers");
      if (seq == p->end()) r.fail("pre_tokenizer", "Sequence without \"pretokenizers\"");
      r.array(*seq, "pre_tokenizer.pretokenizers");
      for (size_t i = 0; i < seq->size(); ++i) {
        std::string path = fmt::format("pre_tokenizer.pretokenizers[{}]", i);
        if (byte_level_last) r.fail(path, "only Split pre-tokenizers may come before ByteLevel, none after it");
        byte_level_last = add_pre_tokenizer(r, (*seq)[i], path, pre, tokenizer_file);
      }
    } else {
      byte_level_last = add_pre_tokenizer(r, *p, "pre_tokenizer", pre, tokenizer_file);
    }
    if (!byte_level_last) {
      r.fail("pre_tokenizer", "no ByteLevel pre-tokenizer: only byte-level BPE is supported");
    }
  }

  // decoder: ByteLevel (or null: we decode byte-level anyway).
  if (auto d = root.find("decoder"); d != root.end() && !d->is_null()) {
    r.object(*d, "decoder");
    std::string type = r.type_of(*d, "decoder");
    if (type != "ByteLevel") r.fail("decoder", fmt::format("unsupported decoder {:?} (only ByteLevel)", type));
  }

  // model: BPE.
  auto m = root.find("model");
  if (m == root.end() || m->is_null()) r.fail("model", "missing");
  r.object(*m, "model");
  if (m->contains("type")) {
    std::string type = r.type_of(*m, "model");
    if (type != "BPE") {
      r.fail("model.type", fmt::format("unsupported model type {:?} (only BPE is supported)", type));
    }
  }
  auto v = m->find("vocab");
  if (v == m->end() || v->is_null()) r.fail("model.vocab", "missing");
  auto vocab = read_vocab(r, *v, "model.vocab");
  auto mg = m->find("merges");
  if (mg == m->end() || mg->is_null()) r.fail("model.merges", "missing");
  r.array(*mg, "model.merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(mg->size());
  for (size_t i = 0; i < mg->size(); ++i) {
    const json& e = (*mg)[i];
    std::string path = fmt::format("model.merges[{}]", i);
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        r.fail(path, fmt::format("expected \"a b\" (two tokens, one space), found {:?}", s));
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      r.fail(path, fmt::format("expected \"a b\" or [\"a\", \"b\"], found {}", e.dump()));
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto it = m->find(key); it != m->end() && !it->is_null() && *it != "") {
      r.fail(fmt::format("model.{}", key), "unsupported (byte-level BPE has none)");
    }
  }
  if (auto it = m->find("dropout"); it != m->end() && !it->is_null()) {
    r.fail("model.dropout", "BPE dropout is unsupported for data preparation; set it to null");
  }
  if (r.flag(*m, "byte_fallback", "model", false)) r.fail("model.byte_fallback", "unsupported");
  BpeModel::Options options;
  if (auto it = m->find("unk_token"); it != m->end() && !it->is_null()) {
    options.unk_token = r.string(*it, "model.unk_token");
    if (!vocab.count(*options.unk_token)) {
      r.fail("model.unk_token", fmt::format("{:?} is not in model.vocab", *options.unk_token));
    }
  }
  options.fuse_unk = r.flag(*m, "fuse_unk", "model", false);
  options.ignore_merges = r.flag(*m, "ignore_merges", "model", false);

  // added_tokens.
  std::vector<AddedToken> added;
  if (auto a = root.find("added_tokens"); a != root.end() && !a->is_null()) {
    r.array(*a, "added_tokens");
    for (size_t i = 0; i < a->size(); ++i) {
      std::string path = fmt::format("added_tokens[{}]", i);
      const json& t = r.object((*a)[i], path);
      AddedToken tok;
      if (!t.contains("id")) r.fail(path, "missing \"id\"");
      if (!t.contains("content")) r.fail(path, "missing \"content\"");
      tok.id = r.id(t["id"], path + ".id");
      tok.content = r.string(t["content"], path + ".content");
      tok.special = r.flag(t, "special", path, false);
      tok.normalized = r.flag(t, "normalized", path, !tok.special);
      tok.lstrip = r.flag(t, "lstrip", path, false);
      tok.rstrip = r.flag(t, "rstrip", path, false);
      if (r.flag(t, "single_word", path, false)) r.fail(path + ".single_word", "true is unsupported");
      added.push_back(std::move(tok));
    }
  }

  std::string eod = eod_token;
  if (eod.empty()) {
    for (const char* c : {"<|endoftext|>", "</s>", "<|end_of_text|>"}) {
      bool present = vocab.count(c) > 0;
      for (const auto& t : added) present = present || t.content == c;
      if (present) {
        eod = c;
        break;
      }
    }
    if (eod.empty()) {
      throw InputError(fmt::format("--tokenizer-file {}: none of <|endoftext|>, </s>, <|end_of_text|> "
                                   "is a token; name the end-of-document token with --eod-token",
                                   tokenizer_file));
    }
  }
  auto model = std::make_unique<BpeModel>(std::move(vocab), merges, options,
                                          fmt::format("tokenizer file {}: model.merges", tokenizer_file));
  std::unique_ptr<BpeTokenizer> tokenizer;
  try {
    tokenizer = std::make_unique<BpeTokenizer>("hf", std::move(model), std::move(pre), std::move(added), eod);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--tokenizer-file {}: {}{}", tokenizer_file, e.what(),
                                 eod_token.empty() ? "" : " (from --eod-token)"));
  }
  apply_document_template(r, root, *tokenizer, tokenizer_file);
  return tokenizer;
}

}  // namespace lattice
