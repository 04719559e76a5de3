// training.gelu_fusion's "auto" (trainer/device_selection.h): on for the bf16 recipe on compute
// capability 9.0 and later, as llm.c's default; off for f32, under selective recompute and before
// Hopper; true and false as set everywhere. And how the key reads and prints.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "trainer/config.h"
#include "trainer/device_selection.h"

namespace lattice {
namespace {

Config bf16_gpt2() {
  Config c;
  c.training.precision = Precision::kBf16;
  return c;
}

TEST_CASE("gelu_fusion auto: on for bf16 from compute capability 9.0, off otherwise") {
  Config c = bf16_gpt2();
  REQUIRE(c.training.gelu_fusion == GeluFusion::kAuto);  // the default
  CHECK(gelu_fusion_choice(c, 90).on);
  CHECK(gelu_fusion_choice(c, 100).on);
  CHECK(gelu_fusion_choice(c, 90).why == "bf16 on compute capability 9.0");
  CHECK_FALSE(gelu_fusion_choice(c, 89).on);
  CHECK(gelu_fusion_choice(c, 80).why.find("compute capability 8.0") != std::string::npos);
  CHECK_FALSE(gelu_fusion_choice(c, 0).on);  // not known (the CPU emulator)

  c.training.precision = Precision::kFp32;
  CHECK_FALSE(gelu_fusion_choice(c, 90).on);
  CHECK(gelu_fusion_choice(c, 90).why.find("f32") != std::string::npos);

  c = bf16_gpt2();
  c.model.recompute = Recompute::kSelective;
  CHECK_FALSE(gelu_fusion_choice(c, 90).on);
  CHECK(gelu_fusion_choice(c, 90).why.find("selective recompute") != std::string::npos);
  c.model.recompute = Recompute::kFull;  // repeats the fused forward itself: same bits
  CHECK(gelu_fusion_choice(c, 90).on);
}

TEST_CASE("gelu_fusion true and false hold whatever the precision, recompute or device") {
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    for (const Recompute r : {Recompute::kNone, Recompute::kSelective}) {
      for (const int cc : {0, 80, 90}) {
        Config c;
        c.training.precision = p;
        c.model.recompute = r;
        c.training.gelu_fusion = GeluFusion::kOn;
        CHECK(gelu_fusion_choice(c, cc).on);
        c.training.gelu_fusion = GeluFusion::kOff;
        CHECK_FALSE(gelu_fusion_choice(c, cc).on);
      }
    }
  }
}

TEST_CASE("training.gelu_fusion reads true, false and \"auto\", prints them back, and names itself otherwise") {
  const auto with = [](const nlohmann::json& value) {
    nlohmann::json doc = {{"training", {{"gelu_fusion", value}}}};
    return parse_config(doc, "t");
  };
  CHECK(with(true).training.gelu_fusion == GeluFusion::kOn);
  CHECK(with(false).training.gelu_fusion == GeluFusion::kOff);
  CHECK(with("auto").training.gelu_fusion == GeluFusion::kAuto);
  CHECK(config_to_json(with(true))["training"]["gelu_fusion"] == true);
  CHECK(config_to_json(with(false))["training"]["gelu_fusion"] == false);
  CHECK(config_to_json(with("auto"))["training"]["gelu_fusion"] == "auto");
  for (const nlohmann::json& bad : {nlohmann::json("on"), nlohmann::json(1)}) {
    try {
      with(bad);
      FAIL("training.gelu_fusion = " << bad.dump() << " was accepted");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("training.gelu_fusion must be true, false or \"auto\""));
    }
  }
}

}  // namespace
}  // namespace lattice
