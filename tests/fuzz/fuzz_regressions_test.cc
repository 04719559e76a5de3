// Inputs on which tools/fuzz.sh found a parser of user files crashing, aborting or allocating
// without bound: each must now end in an InputError that names the file.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/bpe_loaders.h"
#include "kernels/error.h"
#include "trainer/config.h"

namespace fs = std::filesystem;
using namespace lattice;

namespace {

std::string write(const std::string& name, const std::string& bytes) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = (fs::path(tmp ? tmp : fs::temp_directory_path().string()) / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void require_input_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no InputError");
  } catch (const InputError& e) {
    for (const auto& p : parts) CHECK_THAT(e.what(), Catch::Contains(p));
  }
}

const std::string kVocab = R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})";

}  // namespace

// gpt2_bpe crash-31840c96: a merges.txt line ending in a truncated UTF-8 sequence, quoted in the
// error message with fmt's {:?}, aborted the statically linked binary ("assertion failed: negative
// value") in libspdlog.so's stale copy of fmt's string writer.
TEST_CASE("a merges.txt line that is not UTF-8 is an InputError, not an abort") {
  const std::string vocab = write("vocab.json", kVocab);
  const std::string merges = write("merges_latin1.txt", "a b\nab\xcd\n");
  require_input_error([&] { load_gpt2_bpe(vocab, merges, ""); }, {"merges_latin1.txt", "line 2", "\"ab\\xcd\""});
  const std::string spaced = write("merges_latin1_spaced.txt", "a b\na\xcd b\xcd\n");
  require_input_error([&] { load_gpt2_bpe(vocab, spaced, ""); },
                      {"merges_latin1_spaced.txt", "merges[1]", "\"a\\xcd\" \"b\\xcd\""});
}

// config crash-5accbe8c: a --set value that is not UTF-8 (and so not JSON) is kept as a string;
// naming it in a message (json::dump) threw nlohmann's type_error 316, and a string field such as
// data.path kept it until `lattice validate` printed the config or a checkpoint saved it.
TEST_CASE("a --set value that is not UTF-8 is an InputError naming the override") {
  const std::string config = write("config.json", R"({"model": {"arch": "gpt2"}})");
  SECTION("a number field") {
    require_input_error([&] { load_config(config, {"parallel.tensor=2\x9c"}); },
                        {"--set parallel.tensor=", "not valid UTF-8"});
  }
  SECTION("a string field") {
    require_input_error([&] { load_config(config, {"data.path=runs/\xff/data"}); },
                        {"--set data.path=", "not valid UTF-8"});
  }
}
