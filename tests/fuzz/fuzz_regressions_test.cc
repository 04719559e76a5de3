// Inputs on which tools/fuzz.sh found a parser of user files crashing, aborting or allocating
// without bound: each must now end in an InputError that names the file.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "data/bpe_loaders.h"
#include "kernels/error.h"
#include "tests/input_error_testing.h"
#include "trainer/config.h"

using namespace lattice;
using testing::require_input_error;
using testing::write_temp_file;
using nlohmann::json;

namespace {

const std::string kVocab = R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})";

}  // namespace

// gpt2_bpe crash-31840c96: a merges.txt line ending in a truncated UTF-8 sequence, quoted in the
// error message with fmt's {:?}, aborted the statically linked binary ("assertion failed: negative
// value") in libspdlog.so's stale copy of fmt's string writer.
TEST_CASE("a merges.txt line that is not UTF-8 is an InputError, not an abort") {
  const std::string vocab = write_temp_file("vocab.json", kVocab);
  const std::string merges = write_temp_file("merges_latin1.txt", "a b\nab\xcd\n");
  require_input_error([&] { load_gpt2_bpe(vocab, merges, ""); }, {"merges_latin1.txt", "line 2", "\"ab\\xcd\""});
  const std::string spaced = write_temp_file("merges_latin1_spaced.txt", "a b\na\xcd b\xcd\n");
  require_input_error([&] { load_gpt2_bpe(vocab, spaced, ""); },
                      {"merges_latin1_spaced.txt", "merges[1]", "\"a\\xcd\" \"b\\xcd\""});
}

// config crash-5accbe8c: a --set value that is not UTF-8 (and so not JSON) is kept as a string;
// naming it in a message (json::dump) threw nlohmann's type_error 316, and a string field such as
// data.path kept it until `lattice validate` printed the config or a checkpoint saved it.
TEST_CASE("a --set value that is not UTF-8 is an InputError naming the override") {
  const std::string config = write_temp_file("config.json", R"({"model": {"arch": "gpt2"}})");
  SECTION("a number field") {
    require_input_error([&] { load_config(config, {"parallel.tensor=2\x9c"}); },
                        {"--set parallel.tensor=", "not valid UTF-8"});
  }
  SECTION("a string field") {
    require_input_error([&] { load_config(config, {"data.path=runs/\xff/data"}); },
                        {"--set data.path=", "not valid UTF-8"});
  }
}

namespace {

// A metadata.json with one tensor, `model/w` of `global_shape`, stored as `boxes` in one file.
json metadata_with(const json& global_shape, const json& boxes) {
  return json{{"format", "lattice-sharded-checkpoint"}, {"version", 1}, {"step", 1}, {"consumed_samples", 8},
              {"optimizer_step_count", 1}, {"lr_schedule", {{"step", 1}}}, {"rng", {{"seed", 1u}}},
              {"layout", {{"world_size", 1}, {"tensor", 1}, {"pipeline", 1}, {"data", 1}, {"virtual_stages", 1},
                          {"distributed_optimizer", false}}},
              {"optimizer_state", false}, {"config", json::object()},
              {"files", {{"rank_00000.safetensors", {{"bytes", 8u}, {"crc32", 0u}, {"rank", 0}}}}},
              {"tensors", {{"model/w", {{"dtype", "F32"}, {"global_shape", global_shape}, {"boxes", boxes}}}}}};
}

json box(const json& offset, const json& shape) {
  return json{{"offset", offset}, {"shape", shape}, {"file", "rank_00000.safetensors"}, {"key", "model/w"}};
}

}  // namespace

// Found by running the checkpoint_metadata target on huge integers: offset + shape of a box and
// the element count of a global shape overflowed int64 (undefined behaviour; UBSan aborts), so a
// damaged file could pass the coverage check or fail with a wrong count. And by the fuzzer itself:
// a box whose offset and shape differ in length.
TEST_CASE("damaged checkpoint metadata boxes and shapes are InputErrors, not overflows or crashes") {
  const std::string source = "iter_0000001/metadata.json";
  SECTION("a box whose end overflows") {
    // offset + shape wraps to a negative end, which "fits" the global shape.
    const json end = json::array({9223372036854775807LL});
    const json doc = metadata_with(end, json::array({box(end, json::array({1}))}));
    require_input_error([&] { metadata_from_json(doc, source); }, {source, "model/w", "does not fit"});
  }
  SECTION("a box whose offset has fewer dimensions than its shape") {
    // checkpoint_metadata crash-3bc1c170: the coverage check's message read offset[0] of [].
    const json doc = metadata_with(json::array({2, 6}), json::array({box(json::array(), json::array({2, 6}))}));
    require_input_error([&] { metadata_from_json(doc, source); }, {source, "tensors.model/w.boxes[0]", "dimension"});
  }
  SECTION("a global shape whose element count overflows") {
    // 2^32 x 2^32 elements wrap to 0, which the empty list of boxes "covers".
    const json doc = metadata_with(json::array({4294967296LL, 4294967296LL}), json::array());
    require_input_error([&] { metadata_from_json(doc, source); }, {source, "tensors.model/w.global_shape"});
  }
}

// Found by running the hf_tokenizer target on huge ids: the id -> bytes table has max id + 1
// entries, so a vocabulary id of 2^31 - 1 overflowed int (undefined behaviour) and an id of 10^8
// allocated 3.2 GB before anything was checked.
TEST_CASE("a token id far above the number of tokens is an InputError naming the file") {
  const std::string merges = write_temp_file("merges_ok.txt", "a b\n");
  for (const char* id : {"2147483647", "100000000"}) {
    const std::string vocab =
        write_temp_file("vocab_big_id.json", std::string(R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3, "big": )") + id + "}");
    require_input_error([&] { load_gpt2_bpe(vocab, merges, ""); }, {"vocab_big_id.json", id, "number of tokens"});
    const std::string tokenizer = write_temp_file(
        "tokenizer_big_id.json",
        std::string(R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "merges": [], "vocab": )"
                    R"({"a": 0, "<|endoftext|>": 1}}, "added_tokens": [{"id": )") +
            id + R"(, "content": "<big>"}]})");
    require_input_error([&] { load_hf_tokenizer(tokenizer, ""); }, {"tokenizer_big_id.json", id, "number of tokens"});
  }
}

// config crash (json.dict run): a number beyond double's range, such as 1e999, is nlohmann's
// out_of_range 406, not a parse_error: load_config and the tokenizer loaders let it escape as an
// "unexpected failure" (exit 1).
TEST_CASE("a JSON number beyond double's range is an InputError naming the file") {
  SECTION("a config file") {
    const std::string config = write_temp_file("config_1e999.json", R"({"optimizer": {"lr": 1e999}})");
    require_input_error([&] { load_config(config); }, {"config_1e999.json", "invalid JSON", "1e999"});
  }
  SECTION("a tokenizer.json") {
    const std::string tokenizer = write_temp_file("tokenizer_1e999.json", R"({"model": {"dropout": 1e999}})");
    require_input_error([&] { load_hf_tokenizer(tokenizer, ""); }, {"tokenizer_1e999.json", "invalid JSON", "1e999"});
  }
  SECTION("a GPT-2 vocab.json") {
    const std::string vocab = write_temp_file("vocab_1e999.json", R"({"a": 1e999})");
    const std::string merges = write_temp_file("merges_empty.txt", "");
    require_input_error([&] { load_gpt2_bpe(vocab, merges, ""); }, {"vocab_1e999.json", "invalid JSON", "1e999"});
  }
}
