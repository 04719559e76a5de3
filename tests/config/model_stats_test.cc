// Parameter counts and FLOPs per token against numbers worked out by hand.
#include <catch2/catch.hpp>

#include "trainer/config.h"
#include "trainer/model_stats.h"

using namespace lattice;
using nlohmann::json;

TEST_CASE("GPT-2 124M has 124,439,808 parameters") {
  // Hugging Face's gpt2: V = 50257, S = 1024, H = 768, L = 12, F = 3072, biases, tied LM head.
  //   wte 50257*768                     = 38,597,376
  //   wpe 1024*768                      =    786,432
  //   per layer:
  //     ln_1 (weight+bias) 2*768        =      1,536
  //     c_attn 768*2304 + 2304          =  1,771,776
  //     c_proj 768*768 + 768            =    590,592
  //     ln_2 2*768                      =      1,536
  //     c_fc 768*3072 + 3072            =  2,362,368
  //     mlp c_proj 3072*768 + 768       =  2,360,064
  //     sum                             =  7,087,872   x 12 = 85,054,464
  //   ln_f 2*768                        =      1,536
  //   total                             = 124,439,808
  Config c = parse_config(json::parse(R"({"model": {"arch": "gpt2", "num_layers": 12, "hidden_size": 768,
      "num_attention_heads": 12, "vocab_size": 50257, "seq_length": 1024}})"),
                          "gpt2");
  const ModelStats s = compute_model_stats(c);
  CHECK(s.num_params == 124439808);
  CHECK(s.embedding_params == 38597376 + 786432);
  CHECK(s.non_embedding_params == 85054464 + 1536);
  // GEMM weights: 12 * (4*768^2 + 2*768*3072) + LM head 50257*768.
  CHECK(s.matmul_params == 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 50257 * 768);
  CHECK(s.weight_bytes == 4 * s.num_params);
  CHECK(s.grad_bytes == 4 * s.num_params);
  CHECK(s.optimizer_bytes == 8 * s.num_params);
  CHECK(s.main_param_bytes == 0);  // fp32: the weights are the master weights
  CHECK(s.total_bytes == s.weight_bytes + s.grad_bytes + s.optimizer_bytes + s.activation_bytes);
  const std::string table = format_model_stats(s);
  CHECK(table.find("124,439,808") != std::string::npos);
  CHECK(table.find("124.44M") != std::string::npos);
  CHECK(table.find("GFLOP") != std::string::npos);
  CHECK(table.find("GiB") != std::string::npos);
}

TEST_CASE("Llama-style parameter count (GQA, swiglu, untied, no biases)") {
  Config c = parse_config(json::parse(R"({"model": {"arch": "llama", "num_layers": 8, "hidden_size": 512,
      "num_attention_heads": 8, "num_kv_heads": 2, "ffn_hidden_size": 1536, "vocab_size": 32000,
      "seq_length": 1024}})"),
                          "llama");
  const int64_t V = 32000, H = 512, L = 8, F = 1536, D = 64, Hq = 8, Hkv = 2;
  // Per layer: two RMSNorm weights, q and o (H x Hq*D), k and v (H x Hkv*D), gate/up/down (H x F).
  const int64_t per_layer = 2 * H + 2 * H * Hq * D + 2 * H * Hkv * D + 3 * H * F;
  const int64_t expected = V * H /*embedding*/ + L * per_layer + H /*final norm*/ + V * H /*lm_head*/;
  const ModelStats s = compute_model_stats(c);
  CHECK(s.num_params == expected);
  CHECK(s.embedding_params == 2 * V * H);
  CHECK(s.matmul_params == L * (per_layer - 2 * H) + V * H);
}

TEST_CASE("training FLOPs per token of a tiny config, by hand") {
  // L = 2, H = 32, 4 heads (D = 8), F = 128, V = 257, T = 16, tied.
  Config c = parse_config(json::parse(R"({"model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 32,
      "num_attention_heads": 4, "vocab_size": 257, "seq_length": 16},
      "training": {"micro_batch_size": 2, "global_batch_size": 4}})"),
                          "tiny");
  const ModelStats s = compute_model_stats(c);
  // GEMM weights: per layer q,k,v,o 4*32*32 = 4096 and up/down 2*32*128 = 8192 -> 12288, x2 layers
  // = 24576; LM head (tied, still a GEMM) 257*32 = 8224; total 32800. 6 * 32800 = 196800.
  CHECK(s.matmul_params == 32800);
  CHECK(s.matmul_flops_per_token == 196800.0);
  // Attention: 12 * L * T * Hq * D = 12 * 2 * 16 * 32 = 12288.
  CHECK(s.attention_flops_per_token == 12288.0);
  CHECK(s.flops_per_token == 209088.0);
  CHECK(s.tokens_per_iter == 4 * 16);
  CHECK(s.flops_per_iter == 209088.0 * 64);
  CHECK(format_model_stats(s).find("0.209 MFLOP") != std::string::npos);
  // Activations of one micro-batch, N = 2*16 = 32 rows, layernorm stats 2 per row:
  //   per layer: 4H + (Hq+2Hkv)D + HqD + Hq + 2*2 + 2F = 128 + 96 + 32 + 4 + 4 + 256 = 520
  //   after the layers: 2H + 2 + 2V + 4 = 64 + 2 + 514 + 4 = 584
  CHECK(s.activation_bytes == 4 * 32 * (2 * 520 + 584));

  // bf16: the same rows, the values in 2 bytes and the statistics in 4. Per layer the statistics
  // are Hq (lse) + 2*2 (two layernorms' mean and rstd) = 8 of the 520; after the layers 2 (final
  // norm) + 2 (loss, lse) + 2 (ids, targets) = 6 of the 584.
  c.training.precision = Precision::kBf16;
  const ModelStats b = compute_model_stats(c);
  CHECK(b.activation_bytes == 32 * (2 * (2 * 512 + 4 * 8) + (2 * 578 + 4 * 6)));
}

TEST_CASE("activation bytes under recomputation, by hand") {
  // The tiny config above (N = 32 rows; per layer 520 per row, 8 of them fp32 statistics; 584
  // after the layers).
  Config c = parse_config(json::parse(R"({"model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 32,
      "num_attention_heads": 4, "vocab_size": 257, "seq_length": 16},
      "training": {"micro_batch_size": 2, "global_batch_size": 4}})"),
                          "tiny");
  // full: each layer keeps its input (H = 32); one shared layer holds the rest, 520 - 32 = 488.
  c.model.recompute = Recompute::kFull;
  CHECK(compute_model_stats(c).activation_bytes == 4 * 32 * (2 * 32 + 488 + 584));
  // bf16: the kept inputs in 2 bytes; the shared layer's 8 statistics stay 4 bytes.
  c.training.precision = Precision::kBf16;
  CHECK(compute_model_stats(c).activation_bytes == 32 * (2 * (2 * 32 + 480 + 578) + 4 * (8 + 6)));
  c.training.precision = Precision::kFp32;
  // full, the first 2 of 4 layers: 2 inputs, 2 whole layers, the shared layer.
  c.model.num_layers = 4;
  c.model.recompute_num_layers = 2;
  CHECK(compute_model_stats(c).activation_bytes == 4 * 32 * (2 * 32 + 2 * 520 + 488 + 584));
  // selective (2 layers again): the norm outputs 2H = 64, their statistics 2*2 = 4 and the gelu
  // output F = 128 (196 per row) live once in the shared set; each layer keeps 520 - 196 = 324.
  c.model.num_layers = 2;
  c.model.recompute_num_layers = 0;
  c.model.recompute = Recompute::kSelective;
  CHECK(compute_model_stats(c).activation_bytes == 4 * 32 * (2 * 324 + 196 + 584));
}

TEST_CASE("bytes per parameter by precision and layout, Megatron's accounting") {
  Config c = parse_config(json::parse(R"({"model": {"arch": "gpt2", "num_layers": 2, "hidden_size": 32,
      "num_attention_heads": 4, "vocab_size": 257, "seq_length": 16}})"),
                          "tiny");
  const ModelStats f = compute_model_stats(c);
  const int64_t P = f.num_params;
  CHECK(f.weight_bytes + f.grad_bytes + f.main_param_bytes + f.optimizer_bytes == 16 * P);
  c.training.precision = Precision::kBf16;
  const ModelStats b = compute_model_stats(c);
  // 2 (bf16 copy) + 4 (fp32 gradients) + 4 (fp32 master weights) + 8 (moments).
  CHECK(b.weight_bytes == 2 * P);
  CHECK(b.grad_bytes == 4 * P);
  CHECK(b.main_param_bytes == 4 * P);
  CHECK(b.optimizer_bytes == 8 * P);
  CHECK(rank_memory(b, 1, 1, 1, false).bytes_per_param == Approx(18.0));
  // The distributed optimizer shards master weights and moments: 6 + 12/DP (Megatron's 6 + 12/d).
  CHECK(rank_memory(b, 1, 1, 4, true).bytes_per_param == Approx(6.0 + 12.0 / 4).epsilon(1e-3));
  // fp32 weights are their own master shard: 8 + 8/DP (Megatron's 4 + 4 + 8/d).
  CHECK(rank_memory(f, 1, 1, 4, true).bytes_per_param == Approx(8.0 + 8.0 / 4).epsilon(1e-3));
  // Without the distributed optimizer data parallelism replicates everything.
  CHECK(rank_memory(b, 1, 1, 4, false).bytes_per_param == Approx(18.0));
  // Tensor × pipeline split the model: the per-parameter cost stays, the bytes fall.
  const RankMemory split = rank_memory(b, 2, 2, 1, false);
  CHECK(split.weight_bytes == b.weight_bytes / 4);
  CHECK(split.total_bytes ==
        split.weight_bytes + split.grad_bytes + split.main_param_bytes + split.optimizer_bytes + split.activation_bytes);
}
