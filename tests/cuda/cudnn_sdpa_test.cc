// cuDNN SDPA graphs for bf16 causal GQA attention, built and validated for sm_90 on a machine
// without a GPU (graph->set_sm_version(90) + validate(): no handle, no device). Runs in the CUDA
// suite on every --config=cuda machine; execution is checked on a GPU separately.
#include <string>

#include <catch2/catch.hpp>

#include "kernels/cuda/cudnn_sdpa.h"

using Catch::Matchers::Contains;
using lattice::AttentionShape;
using lattice::cuda::cudnn_sdpa_check;
using lattice::cuda::cudnn_sdpa_check_all;
using lattice::cuda::SdpaDirection;

namespace {
constexpr int kHopper = 90;
}

TEST_CASE("cuDNN SDPA graphs validate for our model shapes on sm_90 without a GPU", "[cuda][cudnn]") {
  struct Case {
    const char* name;
    AttentionShape shape;  // batch, seq, q_heads, kv_heads, head_dim
  };
  const Case cases[] = {
      {"GPT-2 124M", {8, 1024, 12, 12, 64}},
      {"GPT-2 1.5B", {8, 1024, 25, 25, 64}},
      {"GQA Llama", {1, 2048, 32, 4, 64}},
      {"head_dim 128", {4, 1024, 16, 16, 128}},
  };
  for (const Case& c : cases) {
    for (SdpaDirection d :
         {SdpaDirection::kForward, SdpaDirection::kBackward, SdpaDirection::kBackwardDeterministic}) {
      INFO(c.name << " " << lattice::cuda::sdpa_direction_name(d));
      const std::string error = cudnn_sdpa_check(c.shape, d, kHopper);
      INFO(error);
      CHECK(error.empty());
    }
  }
}

TEST_CASE("cuDNN SDPA rejects head_dim 20 naming the shape and cuDNN's reason", "[cuda][cudnn]") {
  const AttentionShape shape{8, 1024, 12, 12, 20};
  for (SdpaDirection d : {SdpaDirection::kForward, SdpaDirection::kBackward}) {
    const std::string error = cudnn_sdpa_check(shape, d, kHopper);
    INFO(error);
    CHECK_THAT(error, Contains("head_dim=20"));
    CHECK_THAT(error, Contains("sm_90"));
    CHECK_THAT(error, Contains("hidden_dim"));  // cuDNN's own words
    CHECK_THAT(error, Contains(lattice::cuda::sdpa_direction_name(d)));
  }
  CHECK_THAT(cudnn_sdpa_check_all({1, 128, 4, 4, 264}, kHopper), Contains("head_dim=264"));
}

TEST_CASE("cuDNN SDPA check refuses a q_heads that is not a multiple of kv_heads", "[cuda][cudnn]") {
  CHECK_THAT(cudnn_sdpa_check({1, 128, 6, 4, 64}, SdpaDirection::kForward, kHopper),
             Contains("q_heads=6 is not a multiple of kv_heads=4"));
}

TEST_CASE("cuDNN SDPA backward refuses a sequence of one (s_q = s_kv = 1)", "[cuda][cudnn]") {
  const AttentionShape shape{1, 1, 4, 4, 64};
  CHECK(cudnn_sdpa_check(shape, SdpaDirection::kForward, kHopper).empty());
  CHECK_THAT(cudnn_sdpa_check(shape, SdpaDirection::kBackward, kHopper), Contains("seq=1"));
}
