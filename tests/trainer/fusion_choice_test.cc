// training.gelu_fusion's and training.bias_grad_fusion's "auto" (trainer/device_selection.h): on for
// the bf16 recipe on compute capability 9.0 and later, as llm.c's default; off for f32, before
// Hopper, and for the GELU under selective recompute; true and false as set everywhere. And how the
// keys read and print.
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
  REQUIRE(c.training.gelu_fusion == Fusion::kAuto);  // the default
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

TEST_CASE("gelu_fusion and bias_grad_fusion true and false hold whatever the precision, recompute or device") {
  struct Key {
    Fusion TrainingConfig::*field;
    FusionChoice (*choice)(const Config&, int);
  };
  for (const Key key : {Key{&TrainingConfig::gelu_fusion, &gelu_fusion_choice},
                        Key{&TrainingConfig::bias_grad_fusion, &bias_grad_fusion_choice}}) {
    for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
      for (const Recompute r : {Recompute::kNone, Recompute::kSelective}) {
        for (const int cc : {0, 80, 90}) {
          Config c;
          c.training.precision = p;
          c.model.recompute = r;
          c.training.*key.field = Fusion::kOn;
          CHECK(key.choice(c, cc).on);
          c.training.*key.field = Fusion::kOff;
          CHECK_FALSE(key.choice(c, cc).on);
        }
      }
    }
  }
}

TEST_CASE("bias_grad_fusion auto: on for bf16 from compute capability 9.0, off otherwise") {
  Config c = bf16_gpt2();
  REQUIRE(c.training.bias_grad_fusion == Fusion::kAuto);  // the default
  CHECK(bias_grad_fusion_choice(c, 90).on);
  CHECK(bias_grad_fusion_choice(c, 100).on);
  CHECK(bias_grad_fusion_choice(c, 90).why == "bf16 on compute capability 9.0");
  CHECK_FALSE(bias_grad_fusion_choice(c, 80).on);
  CHECK(bias_grad_fusion_choice(c, 80).why.find("compute capability 8.0") != std::string::npos);
  CHECK_FALSE(bias_grad_fusion_choice(c, 0).on);  // not known (the CPU emulator)
  c.model.recompute = Recompute::kSelective;      // recomputes no weight gradient: no reason to differ
  CHECK(bias_grad_fusion_choice(c, 90).on);
  c.training.precision = Precision::kFp32;
  CHECK_FALSE(bias_grad_fusion_choice(c, 90).on);
  CHECK(bias_grad_fusion_choice(c, 90).why.find("f32") != std::string::npos);
}

TEST_CASE("the fusion keys read true, false and \"auto\", print them back, and name themselves otherwise") {
  for (const std::string key : {"gelu_fusion", "bias_grad_fusion"}) {
    INFO(key);
    const auto with = [&](const nlohmann::json& value) {
      nlohmann::json doc = {{"training", {{key, value}}}};
      const Config c = parse_config(doc, "t");
      return key == "gelu_fusion" ? c.training.gelu_fusion : c.training.bias_grad_fusion;
    };
    const auto printed = [&](const nlohmann::json& value) {
      nlohmann::json doc = {{"training", {{key, value}}}};
      return config_to_json(parse_config(doc, "t"))["training"][key];
    };
    CHECK(with(true) == Fusion::kOn);
    CHECK(with(false) == Fusion::kOff);
    CHECK(with("auto") == Fusion::kAuto);
    CHECK(printed(true) == true);
    CHECK(printed(false) == false);
    CHECK(printed("auto") == "auto");
    for (const nlohmann::json& bad : {nlohmann::json("on"), nlohmann::json(1)}) {
      try {
        with(bad);
        FAIL("training." << key << " = " << bad.dump() << " was accepted");
      } catch (const InputError& e) {
        CHECK_THAT(e.what(), Catch::Contains("training." + key + " must be true, false or \"auto\""));
      }
    }
  }
}

}  // namespace
}  // namespace lattice
