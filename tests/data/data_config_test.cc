// The data config section: data.blend parsing and its errors (naming the field), exactly one of
// data.path / data.blend, the files checked before training, the round trip, and the README.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "tests/data/test_util.h"
#include "tests/readme_testing.h"
#include "trainer/config.h"

using namespace lattice;
using Catch::Contains;
using lattice::testing::TempDir;
using nlohmann::json;

namespace {

json base() {
  return json::parse(R"({
    "model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 257, "seq_length": 32},
    "training": {"micro_batch_size": 2, "global_batch_size": 8, "train_iters": 10},
    "data": {"blend": [[0.7, "data/a"], [0.3, "data/b"]]}
  })");
}

std::string error_of(json doc, const std::vector<std::string>& overrides = {}) {
  try {
    apply_overrides(doc, overrides);
    parse_config(doc, "test.json");
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("no InputError for " << doc.dump());
  return "";
}

}  // namespace

TEST_CASE("data.blend parses, round-trips and can be set with --set") {
  Config c = parse_config(base(), "t");
  REQUIRE(c.data.blend.size() == 2);
  CHECK(c.data.blend[0].weight == 0.7);
  CHECK(c.data.blend[1].prefix == "data/b");
  CHECK(c.data.path.empty());
  const json j = config_to_json(c);
  CHECK(j["data"]["blend"] == json::parse(R"([[0.7, "data/a"], [0.3, "data/b"]])"));
  CHECK(config_to_json(parse_config(j, "round trip")) == j);
  json d = base();
  apply_overrides(d, {R"(data.blend=[[1, "x"], [2, "y"], [3, "z"]])"});
  CHECK(parse_config(d, "t").data.blend.size() == 3);
  d = base();
  d["data"] = {{"path", "p"}, {"blend", json::array()}};  // [] = not set
  CHECK(parse_config(d, "t").data.path == "p");
}

TEST_CASE("data.blend mistakes name the field") {
  json d = base();
  d["data"]["blend"] = "data/a";
  CHECK_THAT(error_of(d), Contains("data.blend must be an array of [weight, prefix] pairs"));
  d["data"]["blend"] = json::parse(R"([[1, "a"], [1, "b"], [1, 5]])");
  CHECK_THAT(error_of(d), Contains("data.blend[2][1]") && Contains("must be a string") && Contains("integer 5"));
  d["data"]["blend"] = json::parse(R"([[1, "a"], ["1", "b"]])");
  CHECK_THAT(error_of(d), Contains("data.blend[1][0]") && Contains("must be a number"));
  d["data"]["blend"] = json::parse(R"([[1, "a"], [0, "b"]])");
  CHECK_THAT(error_of(d), Contains("data.blend[1][0]") && Contains("must be > 0"));
  d["data"]["blend"] = json::parse(R"([[-2, "a"]])");
  CHECK_THAT(error_of(d), Contains("data.blend[0][0]") && Contains("> 0"));
  d["data"]["blend"] = json::parse(R"([[1, "a", 3]])");
  CHECK_THAT(error_of(d), Contains("data.blend[0] must be a [weight, prefix] pair"));
  d["data"]["blend"] = json::parse(R"([[1, ""]])");
  CHECK_THAT(error_of(d), Contains("data.blend[0][1]") && Contains("empty"));
  d = base();
  d["data"]["path"] = "data/c";
  CHECK_THAT(error_of(d), Contains("data.path") && Contains("data.blend") && Contains("exactly one"));
  d = base();
  d["data"]["blnd"] = 1;
  CHECK_THAT(error_of(d), Contains("did you mean 'blend'"));
}

TEST_CASE("validate_for_training: one of data.path / data.blend, and every blend file exists") {
  TempDir dir("data_config_files");
  Config c = parse_config(base(), "t");
  c.data.blend = {};
  CHECK_THROWS_WITH(validate_for_training(c), Contains("data.path") && Contains("data.blend"));
  for (const char* name : {"a.bin", "a.idx", "b.idx"}) std::ofstream(dir / name) << "x";
  c.data.blend = {{1, dir / "a"}, {2, dir / "b"}};
  CHECK_THROWS_WITH(validate_for_training(c), Contains("data.blend[1][1]") && Contains(dir / "b.bin"));
  std::ofstream(dir / "b.bin") << "x";
  CHECK_NOTHROW(validate_for_training(c));
}

TEST_CASE("README documents data.blend in the config reference") {
  const std::string text = testing::readme_text();
  const std::string ref = testing::readme_config_reference(text);
  CHECK_THAT(ref, Contains("| `blend` |"));
  CHECK_THAT(text, Contains("data inspect"));
}
