// `lattice bench --profile-ops`: a training run's op profile counts each op as often as the model
// calls it (from the model's structure), and the table's figures are its rows' per step.
#include <map>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kernels/op_profile.h"
#include "tests/trainer/random_tokens.h"
#include "trainer/config.h"
#include "trainer/op_profile_report.h"
#include "trainer/train_loop.h"

using namespace lattice;

namespace {

constexpr int64_t kLayers = 2, kMicroBatches = 2, kSteps = 4;

// Calls per op over the profiled steps of a tiny model's run (layers, 2 micro-batches per step).
std::map<std::string, int64_t> profiled_calls(const std::string& arch, TrainResult& r) {
  Config c = parse_config(nlohmann::json::parse(R"({"model": {"arch": ")" + arch + R"(", "num_layers": 2,
      "hidden_size": 32, "num_attention_heads": 4, "vocab_size": 257, "seq_length": 16},
      "training": {"micro_batch_size": 2, "global_batch_size": 4, "train_iters": 4},
      "logging": {"metrics_file": ""}})"),
                          "tiny");
  TrainOptions options;
  options.profile_ops = true;
  r = train_on(c, options, test::random_tokens(257), MicroBatchSource{});
  std::map<std::string, int64_t> calls;
  for (const OpTime& row : r.op_profile) calls[row.op] += row.calls;
  return calls;
}

}  // namespace

TEST_CASE("a GPT-2 run's profile holds the steps after the first and every call the model makes") {
  TrainResult r;
  const auto calls = profiled_calls("gpt2", r);
  CHECK_FALSE(OpProfile::running());
  REQUIRE(r.profiled_steps == kSteps - 1);
  const int64_t micro = r.profiled_steps * kMicroBatches;  // micro-batches profiled
  CHECK(calls.at("layernorm_forward") == micro * (2 * kLayers + 1));  // two per layer and the final norm
  CHECK(calls.at("layernorm_backward") == micro * (2 * kLayers + 1));
  CHECK(calls.at("attention_forward") == micro * kLayers);
  CHECK(calls.at("attention_backward") == micro * kLayers);
  CHECK(calls.at("matmul_residual") == micro * 2 * kLayers);  // the attention and MLP outputs join the residual
  CHECK(calls.at("embedding_forward") == micro);
  CHECK(calls.count("adamw_update") == 1);
  for (const OpTime& row : r.op_profile) {
    CHECK(row.seconds >= 0);
    CHECK(row.bytes > 0);
    // Causal attention over q [2, 16, 4, 8]: QK^T and PV, 2 * 2 B Hq T^2 D, halved by the mask;
    // the backward 2.5 times that. Every GEMM does FLOPs; layernorm does none.
    const double attention = 2.0 * 2 * 4 * 16 * 16 * 8;
    if (row.op == "attention_forward") CHECK(row.flops == attention);
    if (row.op == "attention_backward") CHECK(row.flops == 2.5 * attention);
    if (row.op.starts_with("matmul")) CHECK(row.flops > 0);
    if (row.op == "layernorm_forward") CHECK(row.flops == 0);
    // A gather moves its ids, the table rows they select and its output, not the whole table:
    // 2 x 16 i32 ids, 2 x 16 rows of 32 f32 read, the same written.
    if (row.op == "embedding_forward") CHECK(row.bytes == 2 * 16 * 4 + 2 * (2 * 16 * 32 * 4));
    // AdamW reads and writes back its f32 parameters and moments, and reads the gradient: 28 B each.
    if (row.op == "adamw_update") {
      const auto open = row.operands.find('[') + 1;
      CHECK(row.bytes == 28.0 * std::stod(row.operands.substr(open, row.operands.find(']') - open)));
    }
  }
}

TEST_CASE("a Llama run's profile counts its norms, RoPE and SwiGLU") {
  TrainResult r;
  const auto calls = profiled_calls("llama", r);
  const int64_t micro = r.profiled_steps * kMicroBatches;
  CHECK(calls.at("rmsnorm_forward") == micro * (2 * kLayers + 1));
  CHECK(calls.at("rope_forward") == micro * kLayers * 2);  // q and k
  CHECK(calls.at("rope_backward") == micro * kLayers * 2);
  CHECK(calls.at("swiglu_forward") == micro * kLayers);
  CHECK(calls.at("matmul_residual") == micro * 2 * kLayers);  // no biases: the product and the residual
  CHECK(calls.count("layernorm_forward") == 0);
}

TEST_CASE("the table shows each row per step against the step, the rest in one line, and the time in no op") {
  // matmul: 6 calls in 6 ms, each moving 2 GB and doing 3 GFLOP; add: 3 calls in 3 ms of 0.5 GB each.
  const std::vector<OpTime> rows = {{"matmul", "bf16[8,4]", 6, 6e-3, 2e9, 3e9}, {"add", "f32[8]", 3, 3e-3, 5e8, 0},
                                    {"fill", "f32[2]", 3, 1.5e-3, 8, 0}};
  const std::string table = format_op_profile(rows, 3, 5e-3, 2);
  INFO(table);
  // 6 ms over 3 steps: 2 ms per step, 40% of a 5 ms step, 2 calls per step of 1000 us each, each
  // 2e9 B / 1e-3 s = 2000 GB/s and 3e9 FLOP / 1e-3 s = 3 TFLOP/s.
  CHECK_THAT(table, Catch::Contains("    2.000  40.0%        2.0    1000.0   2000.0     3.00  matmul"));
  CHECK_THAT(table, Catch::Contains("bf16[8,4]"));
  // 5e8 B per 1000 us is 500 GB/s; no FLOPs: a dash.
  CHECK_THAT(table, Catch::Contains("    1.000  20.0%        1.0    1000.0    500.0        -  add"));
  CHECK_THAT(table, Catch::Contains("    0.500  10.0%                                         (1 more rows)"));
  // The sums: the matmul alone is the products; add and fill (4.5 ms, 1.5e9 + 24 B) the others; all
  // 13.5e9 B and 18e9 FLOP in 10.5 ms.
  CHECK_THAT(table, Catch::Contains("    2.000  40.0%        2.0             2000.0     3.00  matrix products"));
  CHECK_THAT(table, Catch::Contains("    1.500  30.0%        2.0              333.3        -  the other ops"));
  CHECK_THAT(table, Catch::Contains("    3.500  70.0%        4.0             1285.7     1.71  all ops"));
  CHECK_THAT(table, Catch::Contains("    1.500  30.0%                                         in no op"));
  CHECK_THAT(table, !Catch::Contains("fill"));
}
