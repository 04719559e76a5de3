// The op cases of the backend harness and the comparison of a candidate backend with the CPU.
#include "tests/kernels/backend_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice::test {

Tensor Inputs::uniform(const Shape& shape, float lo, float hi) {
  Tensor t = Tensor::empty(shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(gen_);
  return t;
}

Tensor Inputs::ids(const Shape& shape, int32_t lo, int32_t hi) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = dist(gen_);
  return t;
}

Tensor Inputs::bf16(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::uniform_int_distribution<uint32_t> dist(0, 0xffff);
  for (int64_t i = 0; i < t.numel(); ++i) t.bf16()[i] = static_cast<uint16_t>(dist(gen_));
  return t;
}

namespace {

std::vector<double> none() { return {}; }

}  // namespace

// bf16 variants list the data operands of each op (kernels/ops.h): all of them, and where an op
// accumulates parameter gradients also bf16 inputs into f32 gradients (the mixed-precision normal).
std::vector<OpCase> op_cases() {
  using In = Inputs;
  using T = Tensors;
  constexpr int64_t N = 6, H = 20, V = 11;
  const ops::AdamWParams adam{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                              .step = 3, .grad_scale = 0.5f};
  std::vector<OpCase> c = {
      {"fill", "", 0, [](In& in) { return T{in.uniform({N, H})}; },
       [](T& t) { ops::fill(t[0], 0.25f); return none(); }, {{0}}},
      {"copy", "", 0, [](In& in) { return T{in.uniform({N, H}), in.uniform({H, N})}; },
       [](T& t) { ops::copy(t[0], t[1]); return none(); }},
      {"scale", "", 1e-6, [](In& in) { return T{in.uniform({N, H})}; },
       [](T& t) { ops::scale(t[0], -1.5f); return none(); }, {{0}}},
      {"axpy", "", 1e-6, [](In& in) { return T{in.uniform({N, H}), in.uniform({N, H})}; },
       [](T& t) { ops::axpy(0.75f, t[0], t[1]); return none(); }, {{0, 1}, {0}}},
      {"add", "", 1e-6, [](In& in) { return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({N, H})}; },
       [](T& t) { ops::add(t[0], t[1], t[2]); return none(); }, {{0, 1, 2}, {0, 1}}},
      {"add", "out aliases a", 1e-6, [](In& in) { return T{in.uniform({N, H}), in.uniform({N, H})}; },
       [](T& t) { ops::add(t[0], t[1], t[0]); return none(); }, {{0, 1}, {0}}},
      {"sum_squares", "", 1e-6, [](In& in) { return T{in.uniform({70000})}; },
       [](T& t) { return std::vector<double>{ops::sum_squares(t[0])}; }},
      {"sum_to", "", 1e-9, [](In& in) { return T{in.uniform({70000}), Tensor::zeros({3}, DType::kF64)}; },
       [](T& t) { ops::sum_to(t[0], t[1], 1); return none(); }},
      {"sum_to", "slot outside out", 0, [](In& in) { return T{in.uniform({N}), Tensor::zeros({3}, DType::kF64)}; },
       [](T& t) { ops::sum_to(t[0], t[1], 3); return none(); }},
      {"sum_squares_to", "", 1e-6, [](In& in) { return T{in.uniform({70000}), Tensor::zeros({3}, DType::kF64)}; },
       [](T& t) { ops::sum_squares_to(t[0], t[1], 2); return none(); }},
      // Small inputs for the bf16 runs, whose bf16_ops_test bound perturbs every element.
      {"sum_squares", "small", 1e-6, [](In& in) { return T{in.uniform({N, H})}; },
       [](T& t) { return std::vector<double>{ops::sum_squares(t[0])}; }, {{0}}},
      {"sum_to", "small", 1e-9, [](In& in) { return T{in.uniform({N, H}), Tensor::zeros({3}, DType::kF64)}; },
       [](T& t) { ops::sum_to(t[0], t[1], 1); return none(); }, {{0}}},
      {"sum_squares_to", "small", 1e-6, [](In& in) { return T{in.uniform({N, H}), Tensor::zeros({3}, DType::kF64)}; },
       [](T& t) { ops::sum_squares_to(t[0], t[1], 2); return none(); }, {{0}}},
      {"cast", "f32 -> bf16", 0,
       [](In& in) { return T{in.uniform({N, H}, -1e3f, 1e3f), Tensor::zeros({N, H}, DType::kBF16)}; },
       [](T& t) { ops::cast(t[0], t[1]); return none(); }},
      {"cast", "bf16 -> f32", 0, [](In& in) { return T{in.bf16({N, H}), in.uniform({N, H})}; },
       [](T& t) { ops::cast(t[0], t[1]); return none(); }},
      {"add_bias", "", 1e-6, [](In& in) { return T{in.uniform({2, 3, H}), in.uniform({H})}; },
       [](T& t) { ops::add_bias(t[0], t[1]); return none(); }, {{0, 1}}},
      {"bias_backward", "", 1e-5, [](In& in) { return T{in.uniform({2, 3, H}), in.uniform({H})}; },
       [](T& t) { ops::bias_backward(t[0], t[1]); return none(); }, {{0, 1}, {0}}},
      {"embedding_forward", "", 0,
       [](In& in) { return T{in.ids({N}, 0, V), in.uniform({V, H}), in.uniform({N, H})}; },
       [](T& t) { ops::embedding_forward(t[0], t[1], t[2]); return none();  }, {{1, 2}}},
      {"embedding_forward", "id out of range", 0,
       [](In& in) { return T{in.ids({N}, V, V + 3), in.uniform({V, H}), in.uniform({N, H})}; },
       [](T& t) { ops::embedding_forward(t[0], t[1], t[2]); return none(); }},
      {"embedding_backward", "", 1e-6,
       [](In& in) { return T{in.ids({N}, 0, 3), in.uniform({N, H}), in.uniform({V, H})}; },
       [](T& t) { ops::embedding_backward(t[0], t[1], t[2]); return none(); }, {{1, 2}, {1}}},
      {"add_position_embedding", "[B, T, H]", 1e-6,
       [](In& in) { return T{in.uniform({2, 3, H}), in.uniform({5, H})}; },
       [](T& t) { ops::add_position_embedding(t[0], t[1]); return none(); }, {{0, 1}}},
      {"position_embedding_backward", "[B, T, H]", 1e-6,
       [](In& in) { return T{in.uniform({2, 3, H}), in.uniform({5, H})}; },
       [](T& t) { ops::position_embedding_backward(t[0], t[1]); return none(); }, {{0, 1}, {0}}},
      {"embedding_forward_shard", "", 0,
       [](In& in) { return T{in.ids({N}, 0, V), in.uniform({4, H}), in.uniform({N, H})}; },
       [](T& t) { ops::embedding_forward_shard(t[0], t[1], 4, V, t[2]); return none(); }, {{1, 2}}},
      {"embedding_backward_shard", "", 1e-6,
       [](In& in) { return T{in.ids({N}, 0, V), in.uniform({N, H}), in.uniform({4, H})}; },
       [](T& t) { ops::embedding_backward_shard(t[0], t[1], 4, V, t[2]); return none(); }, {{1, 2}, {1}}},
      {"add_position_embedding", "token run", 1e-6,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({5, H})}; },
       [](T& t) { ops::add_position_embedding(t[0], t[1], 4, 3); return none(); }, {{0, 1}}},
      {"position_embedding_backward", "token run", 1e-6,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({5, H})}; },
       [](T& t) { ops::position_embedding_backward(t[0], 4, 3, t[1]); return none(); }, {{0, 1}, {0}}},
      {"layernorm_forward", "with beta", 1e-5,
       [](In& in) {
         return T{in.uniform({N, H}), in.uniform({H}), in.uniform({H}), in.uniform({N, H}), in.uniform({N}),
                  in.uniform({N})};
       },
       [](T& t) { ops::layernorm_forward(t[0], t[1], t[2], 1e-5f, t[3], t[4], t[5]); return none(); }, {{0, 1, 2, 3}}},
      {"layernorm_forward", "without beta", 1e-5,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({H}), in.uniform({N, H}), in.uniform({N}), in.uniform({N})}; },
       [](T& t) { ops::layernorm_forward(t[0], t[1], Tensor(), 1e-5f, t[2], t[3], t[4]); return none(); }, {{0, 1, 2}}},
      {"layernorm_backward", "", 1e-5,
       [](In& in) {
         return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({H}), in.uniform({N}), in.uniform({N}, 0.5f, 2.0f),
                  in.uniform({N, H}), in.uniform({H}), in.uniform({H})};
       },
       [](T& t) { ops::layernorm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]); return none(); },
       {{0, 1, 2, 5, 6, 7}, {0, 1, 2, 5}}},
      {"rmsnorm_forward", "", 1e-5,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({H}), in.uniform({N, H}), in.uniform({N})}; },
       [](T& t) { ops::rmsnorm_forward(t[0], t[1], 1e-5f, t[2], t[3]); return none(); }, {{0, 1, 2}}},
      {"rmsnorm_backward", "", 1e-5,
       [](In& in) {
         return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({H}), in.uniform({N}, 0.5f, 2.0f),
                  in.uniform({N, H}), in.uniform({H})};
       },
       [](T& t) { ops::rmsnorm_backward(t[0], t[1], t[2], t[3], t[4], t[5]); return none(); },
       {{0, 1, 2, 4, 5}, {0, 1, 2, 4}}},
      {"gelu_forward", "", 1e-6, [](In& in) { return T{in.uniform({N, H}, -4, 4), in.uniform({N, H})}; },
       [](T& t) { ops::gelu_forward(t[0], t[1]); return none(); }, {{0, 1}}},
      {"gelu_backward", "", 1e-6,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({N, H}, -4, 4), in.uniform({N, H})}; },
       [](T& t) { ops::gelu_backward(t[0], t[1], t[2]); return none(); }, {{0, 1, 2}}},
      {"swiglu_forward", "", 1e-6,
       [](In& in) { return T{in.uniform({N, H}, -4, 4), in.uniform({N, H}), in.uniform({N, H})}; },
       [](T& t) { ops::swiglu_forward(t[0], t[1], t[2]); return none(); }, {{0, 1, 2}}},
      {"swiglu_backward", "", 1e-6,
       [](In& in) {
         return T{in.uniform({N, H}), in.uniform({N, H}, -4, 4), in.uniform({N, H}), in.uniform({N, H}),
                  in.uniform({N, H})};
       },
       [](T& t) { ops::swiglu_backward(t[0], t[1], t[2], t[3], t[4]); return none(); }, {{0, 1, 2, 3, 4}}},
      {"rope_forward", "", 1e-5, [](In& in) { return T{in.uniform({2, 5, 3, 8})}; },
       [](T& t) { ops::rope_forward(t[0], 10000.0f); return none(); }, {{0}}},
      {"rope_backward", "", 1e-5, [](In& in) { return T{in.uniform({2, 5, 3, 8})}; },
       [](T& t) { ops::rope_backward(t[0], 10000.0f); return none(); }, {{0}}},
      {"attention_forward", "GQA 4:2", 1e-5,
       [](In& in) {
         return T{in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 2, 8}), in.uniform({2, 5, 2, 8}),
                  in.uniform({2, 5, 4, 8}), in.uniform({2, 4, 5})};
       },
       [](T& t) { ops::attention_forward(t[0], t[1], t[2], t[3], t[4]); return none(); }, {{0, 1, 2, 3}}},
      {"attention_backward", "GQA 4:2", 1e-4,
       [](In& in) {
         T t{in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 2, 8}), in.uniform({2, 5, 2, 8}),
             in.uniform({2, 5, 4, 8}), in.uniform({2, 4, 5}),  in.uniform({2, 5, 4, 8}), in.uniform({2, 5, 2, 8}),
             in.uniform({2, 5, 2, 8})};
         ops::attention_forward(t[1], t[2], t[3], t[4], t[5]);  // a consistent out and lse
         return t;
       },
       [](T& t) { ops::attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]); return none(); },
       {{0, 1, 2, 3, 4, 6, 7, 8}}},
      {"cross_entropy_forward", "", 1e-5,
       [](In& in) { return T{in.uniform({N, V}, -3, 3), in.ids({N}, 0, V), in.uniform({N}), in.uniform({N})}; },
       [](T& t) { ops::cross_entropy_forward(t[0], t[1], t[2], t[3]); return none(); }, {{0}}},
      {"cross_entropy_backward", "", 1e-5,
       [](In& in) {
         T t{in.uniform({N, V}, -3, 3), in.ids({N}, 0, V), in.uniform({N}), in.uniform({N, V})};
         Tensor losses = Tensor::empty({N});
         ops::cross_entropy_forward(t[0], t[1], losses, t[2]);
         return t;
       },
       [](T& t) { ops::cross_entropy_backward(t[0], t[1], t[2], 0.5f, t[3]); return none(); }, {{0, 3}}},
      {"cross_entropy_backward", "dlogits aliases logits", 1e-5,
       [](In& in) {
         T t{in.uniform({N, V}, -3, 3), in.ids({N}, 0, V), in.uniform({N})};
         Tensor losses = Tensor::empty({N});
         ops::cross_entropy_forward(t[0], t[1], losses, t[2]);
         return t;
       },
       [](T& t) { ops::cross_entropy_backward(t[0], t[1], t[2], 0.5f, t[0]); return none(); }, {{0}}},
      {"cross_entropy_shard_max", "", 0, [](In& in) { return T{in.uniform({N, 8}, -3, 3), in.uniform({N})}; },
       [](T& t) { ops::cross_entropy_shard_max(t[0], 6, t[1]); return none(); }, {{0}}},
      {"cross_entropy_shard_sums", "", 1e-5,
       [](In& in) {
         return T{in.uniform({N, 8}, -3, 3), in.ids({N}, 0, 14), in.uniform({N}, 2, 3), in.uniform({2, N})};
       },
       [](T& t) { ops::cross_entropy_shard_sums(t[0], t[1], t[2], 8, 6, 14, t[3]); return none(); }, {{0}}},
      {"cross_entropy_shard_loss", "", 1e-6,
       [](In& in) { return T{in.uniform({N}), in.uniform({2, N}, 0.5f, 4), in.uniform({N}), in.uniform({N})}; },
       [](T& t) { ops::cross_entropy_shard_loss(t[0], t[1], t[2], t[3]); return none(); }},
      {"cross_entropy_shard_backward", "", 1e-5,
       [](In& in) {
         return T{in.uniform({N, 8}, -3, 3), in.ids({N}, 0, 14), in.uniform({N}, 3, 4), in.uniform({N, 8})};
       },
       [](T& t) { ops::cross_entropy_shard_backward(t[0], t[1], t[2], 0.5f, 8, 6, 14, t[3]); return none(); },
       {{0, 3}}},
      {"cross_entropy_shard_backward", "dlogits aliases logits", 1e-5,
       [](In& in) { return T{in.uniform({N, 8}, -3, 3), in.ids({N}, 0, 14), in.uniform({N}, 3, 4)}; },
       [](T& t) { ops::cross_entropy_shard_backward(t[0], t[1], t[2], 0.5f, 8, 6, 14, t[0]); return none(); }, {{0}}},
      {"adamw_update", "", 1e-6,
       [](In& in) { return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({N, H}), in.uniform({N, H}, 0, 1)}; },
       [adam](T& t) { ops::adamw_update(t[0], t[1], t[2], t[3], adam); return none(); }},
      {"fill_normal", "box of a global tensor", 1e-5, [](In& in) { return T{in.uniform({3, 4})}; },
       [](T& t) { ops::fill_normal(t[0], {8, 10}, {2, 5}, 1234, 99, 0.02f); return none(); }},
  };
  // Every transpose combination accumulating into c (bf16, or f32 as weight gradients are), an
  // overwritten c and the empty product.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      c.push_back({"matmul", fmt::format("trans_a {} trans_b {}", ta, tb), 1e-5,
                   [ta, tb](In& in) {
                     return T{in.uniform(ta ? Shape{9, 7} : Shape{7, 9}), in.uniform(tb ? Shape{5, 9} : Shape{9, 5}),
                              in.uniform({7, 5})};
                   },
                   [ta, tb](T& t) { ops::matmul(t[0], ta, t[1], tb, t[2], 0.5f, 1.0f); return none(); },
                   {{0, 1, 2}, {0, 1}}});
    }
  }
  c.push_back({"matmul", "beta 0", 1e-5,
               [](In& in) { return T{in.uniform({7, 9}), in.uniform({5, 9}), in.uniform({7, 5})}; },
               [](T& t) { ops::matmul(t[0], false, t[1], true, t[2]); return none(); }, {{0, 1, 2}}});
  // A bias that is a whole tensor, and one that is a view at an odd offset (a slice of the flat
  // parameter buffer), which a fused epilogue may decline.
  c.push_back({"matmul_bias", "", 1e-5,
               [](In& in) { return T{in.uniform({7, 9}), in.uniform({5, 9}), in.uniform({5}), in.uniform({7, 5})}; },
               [](T& t) { ops::matmul_bias(t[0], false, t[1], true, t[2], t[3]); return none(); },
               {{0, 1, 2, 3}, {0, 1}}});
  c.push_back({"matmul_bias", "bias at an odd offset", 1e-5,
               [](In& in) { return T{in.uniform({9, 7}), in.uniform({9, 5}), in.uniform({6}), in.uniform({7, 5})}; },
               [](T& t) {
                 const Tensor bias = t[2].slice_flat(1, {5});
                 ops::matmul_bias(t[0], true, t[1], false, bias, t[3]);
                 return none();
               },
               {{0, 1, 2, 3}}});
  // A GELU MLP's GEMMs with their GELU, with and without a bias (a fused epilogue where the device
  // has one and training.gelu_fusion is on; the unfused ops otherwise, as here).
  c.push_back({"matmul_bias_gelu", "", 1e-5,
               [](In& in) {
                 return T{in.uniform({7, 9}), in.uniform({16, 9}), in.uniform({16}), in.uniform({7, 16}),
                          in.uniform({7, 16})};
               },
               [](T& t) { ops::matmul_bias_gelu(t[0], false, t[1], true, t[2], t[3], t[4]); return none(); },
               {{0, 1, 2, 3, 4}, {0, 1}}});
  c.push_back({"matmul_bias_gelu", "no bias", 1e-5,
               [](In& in) { return T{in.uniform({9, 7}), in.uniform({9, 8}), in.uniform({7, 8}), in.uniform({7, 8})}; },
               [](T& t) { ops::matmul_bias_gelu(t[0], true, t[1], false, Tensor{}, t[2], t[3]); return none(); },
               {{0, 1, 2, 3}}});
  c.push_back({"matmul_gelu_backward", "", 1e-5,
               [](In& in) {
                 return T{in.uniform({7, 5}), in.uniform({5, 16}), in.uniform({7, 16}, -3, 3), in.uniform({7, 16})};
               },
               [](T& t) { ops::matmul_gelu_backward(t[0], false, t[1], false, t[2], t[3]); return none(); },
               {{0, 1, 2, 3}, {0, 1}}});
  c.push_back({"matmul", "k = 0", 0, [](In& in) { return T{in.uniform({0, 7}), in.uniform({0, 5}), in.uniform({7, 5})}; },
               [](T& t) { ops::matmul(t[0], true, t[1], false, t[2], 1.0f, 0.5f); return none(); }, {{0, 1, 2}}});
  // Views at odd offsets (slices of the flat parameter and gradient buffers are such views): a
  // device kernel's wide loads and stores must fall back to element access there. Last, so the
  // cases before keep their seeds.
  c.push_back({"add", "operands at odd offsets", 1e-6,
               [](In& in) { return T{in.uniform({N * H + 3}), in.uniform({N * H + 1}), in.uniform({N * H + 2})}; },
               [](T& t) {
                 Tensor out = t[2].slice_flat(2, {N, H});
                 ops::add(t[0].slice_flat(3, {N, H}), t[1].slice_flat(1, {N, H}), out);
                 return none();
               },
               {{0, 1, 2}, {0, 1}}});
  c.push_back({"gelu_forward", "operands at odd offsets", 1e-6,
               [](In& in) { return T{in.uniform({N * H + 1}, -4, 4), in.uniform({N * H + 5})}; },
               [](T& t) {
                 Tensor y = t[1].slice_flat(5, {N, H});
                 ops::gelu_forward(t[0].slice_flat(1, {N, H}), y);
                 return none();
               },
               {{0, 1}}});
  c.push_back({"layernorm_forward", "operands at odd offsets", 1e-5,
               [](In& in) {
                 return T{in.uniform({N * H + 1}), in.uniform({H + 3}), in.uniform({H + 1}), in.uniform({N * H + 7}),
                          in.uniform({N}), in.uniform({N})};
               },
               [](T& t) {
                 Tensor y = t[3].slice_flat(7, {N, H});
                 ops::layernorm_forward(t[0].slice_flat(1, {N, H}), t[1].slice_flat(3, {H}), t[2].slice_flat(1, {H}), 1e-5f, y,
                                        t[4], t[5]);
                 return none();
               },
               {{0, 1, 2, 3}}});
  // The fused classifier: dlogits separate and aliasing logits; then, in f32 only (bf16_ops_test's
  // bound perturbs every element), rows long enough that each of a device's threads sees several
  // packs (CUDA: 1024 threads of 8 columns per row) whose maxima grow along the row, as the online
  // softmax's rescaling needs.
  c.push_back({"cross_entropy_forward_backward", "", 1e-5,
               [](In& in) {
                 return T{in.uniform({N, V}, -3, 3), in.ids({N}, 0, V), in.uniform({N}), in.uniform({N}),
                          in.uniform({N, V})};
               },
               [](T& t) { ops::cross_entropy_forward_backward(t[0], t[1], 0.5f, t[2], t[3], t[4]); return none(); },
               {{0, 4}, {0}}});
  c.push_back({"cross_entropy_forward_backward", "dlogits aliases logits", 1e-5,
               [](In& in) { return T{in.uniform({N, V}, -3, 3), in.ids({N}, 0, V), in.uniform({N}), in.uniform({N})}; },
               [](T& t) { ops::cross_entropy_forward_backward(t[0], t[1], 0.5f, t[2], t[3], t[0]); return none(); },
               {{0}}});
  c.push_back({"cross_entropy_forward_backward", "long rows, rising", 1e-5,
               [](In& in) {
                 constexpr int64_t kRow = 20000;
                 Tensor logits = in.uniform({N, kRow}, -3, 3);
                 for (int64_t i = 0; i < logits.numel(); ++i)
                   logits.f32()[i] += 4.0f * static_cast<float>(i % kRow) / kRow;
                 return T{logits, in.ids({N}, 0, kRow), in.uniform({N}), in.uniform({N})};
               },
               [](T& t) { ops::cross_entropy_forward_backward(t[0], t[1], 0.5f, t[2], t[3], t[0]); return none(); }});
  // Products sharing an operand, laid out as the model lays them out: weights and biases alternating
  // in a flat parameter buffer, outputs and output gradients side by side (one stride each: a batched
  // GEMM where the device has one; 8 x 7 weights keep every bias 16-byte aligned in f32 and bf16).
  // Then outputs at no single stride, which run one product at a time everywhere.
  constexpr int64_t kOut = 8, kIn = 7, kRows = 6, kBlock = kOut * kIn + kOut;
  const auto group = [](const Tensor& buffer, int64_t count, int64_t step, int64_t first, const Shape& shape) {
    std::vector<Tensor> slices;
    for (int64_t i = 0; i < count; ++i) slices.push_back(buffer.slice_flat(i * step + first, shape));
    return slices;
  };
  c.push_back({"matmul_group", "q, k, v with biases", 1e-5,
               [](In& in) { return T{in.uniform({kRows, kIn}), in.uniform({3 * kBlock}), in.uniform({3, kRows, kOut})}; },
               [group](T& t) {
                 std::vector<Tensor> out = group(t[2], 3, kRows * kOut, 0, {kRows, kOut});
                 ops::matmul_group({&t[0], 1}, false, group(t[1], 3, kBlock, 0, {kOut, kIn}), true,
                                   group(t[1], 3, kBlock, kOut * kIn, {kOut}), out);
                 return none();
               },
               {{0, 1, 2}}});
  c.push_back({"matmul_group", "weight gradients, accumulated", 1e-5,
               [](In& in) { return T{in.uniform({3, kRows, kOut}), in.uniform({kRows, kIn}), in.uniform({3 * kBlock})}; },
               [group](T& t) {
                 std::vector<Tensor> grads = group(t[2], 3, kBlock, 0, {kOut, kIn});
                 ops::matmul_group(group(t[0], 3, kRows * kOut, 0, {kRows, kOut}), true, {&t[1], 1}, false, {}, grads,
                                   1.0f, 1.0f);
                 return none();
               },
               {{0, 1}, {0, 1, 2}}});
  c.push_back({"matmul_group", "outputs at no single stride", 1e-5,
               [](In& in) { return T{in.uniform({kRows, kIn}), in.uniform({2, kOut, kIn}), in.uniform({200})}; },
               [](T& t) {
                 std::vector<Tensor> out = {t[2].slice_flat(0, {kRows, kOut}), t[2].slice_flat(48, {kRows, kOut}),
                                            t[2].slice_flat(112, {kRows, kOut})};
                 const std::vector<Tensor> weights = {t[1].slice_flat(0, {kOut, kIn}), t[1].slice_flat(56, {kOut, kIn}),
                                                      t[1].slice_flat(0, {kOut, kIn})};
                 ops::matmul_group({&t[0], 1}, false, weights, true, {}, out, 0.5f, 1.0f);
                 return none();
               },
               {{0, 1, 2}}});
  // Norm backwards that add the residual path's gradient (a pre-norm block); bf16 runs with the
  // residual gradient bf16 and f32 under a bf16 dx.
  c.push_back({"layernorm_backward", "with the residual gradient", 1e-5,
               [](In& in) {
                 return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({H}), in.uniform({N}),
                          in.uniform({N}, 0.5f, 2.0f), in.uniform({N, H}), in.uniform({H}), in.uniform({H}),
                          in.uniform({N, H})};
               },
               [](T& t) { ops::layernorm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]); return none(); },
               {{0, 1, 2, 5, 6, 7, 8}, {0, 1, 2, 5}}, /*rounds_twice=*/true});
  c.push_back({"rmsnorm_backward", "with the residual gradient", 1e-5,
               [](In& in) {
                 return T{in.uniform({N, H}), in.uniform({N, H}), in.uniform({H}), in.uniform({N}, 0.5f, 2.0f),
                          in.uniform({N, H}), in.uniform({H}), in.uniform({N, H})};
               },
               [](T& t) { ops::rmsnorm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6]); return none(); },
               {{0, 1, 2, 4, 5, 6}, {0, 1, 2, 4}}, /*rounds_twice=*/true});
  // A linear layer's output joining the residual stream. Inputs on a grid of halves and three terms
  // per product, so that every product, sum and rounding is exact even in bf16: a fused GEMM (one
  // rounding) and the ops it replaces (three) then agree bit for bit, and a wrong operand shows at
  // once. (tests/cuda/cuda_ops_test.cc holds the fused GEMM to its rounding bound on real data.)
  const auto halves = [](Tensor t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::round(t.f32()[i] * 2.0f) / 2.0f;
    return t;
  };
  c.push_back({"matmul_residual", "", 1e-5,
               [halves](In& in) {
                 return T{halves(in.uniform({7, 3})), halves(in.uniform({5, 3})), halves(in.uniform({5})),
                          halves(in.uniform({7, 5})), in.uniform({7, 5})};
               },
               [](T& t) { ops::matmul_residual(t[0], false, t[1], true, t[2], t[3], t[4]); return none(); },
               {{0, 1, 2, 3, 4}, {0, 1}}});
  c.push_back({"matmul_residual", "no bias, residual at an odd offset", 1e-5,
               [halves](In& in) {
                 return T{halves(in.uniform({3, 7})), halves(in.uniform({3, 5})), halves(in.uniform({7 * 5 + 3})),
                          in.uniform({7, 5})};
               },
               [](T& t) {
                 ops::matmul_residual(t[0], true, t[1], false, Tensor{}, t[2].slice_flat(3, {7, 5}), t[3]);
                 return none();
               },
               {{0, 1, 2, 3}}});
  c.push_back({"matmul_residual", "bias at an odd offset", 1e-5,
               [halves](In& in) {
                 return T{halves(in.uniform({7, 3})), halves(in.uniform({5, 3})), halves(in.uniform({6})),
                          halves(in.uniform({7, 5})), in.uniform({7, 5})};
               },
               [](T& t) {
                 ops::matmul_residual(t[0], false, t[1], true, t[2].slice_flat(1, {5}), t[3], t[4]);
                 return none();
               },
               {{0, 1, 2, 3, 4}}});
  // Masked logits: each row's first 4096 are -inf (targets after them), so on a device whose threads
  // take the row's packs in turn (CUDA: 1024 threads of 8) half the threads start the online softmax
  // on packs of -inf alone, whose terms are exp(-inf) = 0 and not exp(-inf - -inf) = NaN. f32 only,
  // as the long rows above.
  c.push_back({"cross_entropy_forward_backward", "long rows, the first 4096 logits -inf", 1e-5,
               [](In& in) {
                 constexpr int64_t kRow = 12000, kMasked = 4096;
                 Tensor logits = in.uniform({N, kRow}, -3, 3);
                 for (int64_t i = 0; i < logits.numel(); ++i) {
                   if (i % kRow < kMasked) logits.f32()[i] = -std::numeric_limits<float>::infinity();
                 }
                 return T{logits, in.ids({N}, kMasked, kRow), in.uniform({N}), in.uniform({N})};
               },
               [](T& t) { ops::cross_entropy_forward_backward(t[0], t[1], 0.5f, t[2], t[3], t[0]); return none(); }});
  // The q, k, v products' bias gradients (the dys side by side, the biases in the flat buffer as
  // above), then five of them. Appended, as each new case is: a case's inputs depend on its index.
  c.push_back({"bias_backward_group", "q, k, v", 1e-5,
               [](In& in) { return T{in.uniform({3, kRows, kOut}), in.uniform({3 * kBlock})}; },
               [group](T& t) {
                 std::vector<Tensor> dbiases = group(t[1], 3, kBlock, kOut * kIn, {kOut});
                 ops::bias_backward_group(group(t[0], 3, kRows * kOut, 0, {kRows, kOut}), dbiases);
                 return none();
               },
               {{0, 1}, {0}}});
  c.push_back({"bias_backward_group", "five products", 1e-5,
               [](In& in) { return T{in.uniform({5, 2 * kRows, kIn}), in.uniform({5 * kIn})}; },
               [group](T& t) {
                 std::vector<Tensor> dbiases = group(t[1], 5, kIn, 0, {kIn});
                 ops::bias_backward_group(group(t[0], 5, 2 * kRows * kIn, 0, {2 * kRows, kIn}), dbiases);
                 return none();
               },
               {{0, 1}, {0}}});
  // A linear layer's parameter gradients accumulating into f32 (a fused GEMM epilogue where the
  // device has one and training.bias_grad_fusion is on; matmul then bias_backward otherwise).
  c.push_back({"linear_weight_grad", "", 1e-5,
               [](In& in) {
                 return T{in.uniform({2 * kRows, kOut}), in.uniform({2 * kRows, kIn}), in.uniform({kOut, kIn}),
                          in.uniform({kOut})};
               },
               [](T& t) { ops::linear_weight_grad(t[0], t[1], t[2], t[3]); return none(); },
               {{0, 1}}});
  return c;
}

namespace {

// The result of one run of a case: the tensors on the host, the scalars, or the error.
struct Outcome {
  Tensors tensors;
  std::vector<double> scalars;
  std::string error;  // empty: no error
};

Outcome run_on(const DeviceContext& ctx, const OpCase& c, const Tensors& host_inputs) {
  Outcome o;
  Tensors t;
  for (const Tensor& h : host_inputs) t.push_back(ctx.to_device(h));
  try {
    o.scalars = c.run(t);
  } catch (const Error& e) {
    o.error = e.what();
  }
  for (const Tensor& d : t) o.tensors.push_back(ctx.to_host(d));
  return o;
}

bool close(double got, double want, double tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

// The first difference between two host tensors of equal shape, or "".
std::string compare(const Tensor& got, const Tensor& want, double tol) {
  const bool floating = got.dtype() != DType::kI32;
  if (got.dtype() == DType::kBF16 && tol > 0.0) tol += 1.0 / 128;  // one bf16 ulp: f32 results tol apart round apart
  if (!floating || tol == 0.0) {
    if (got.bytes() == 0 || std::memcmp(got.raw(), want.raw(), got.bytes()) == 0) return "";
    const size_t esize = dtype_size(got.dtype());
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (std::memcmp(static_cast<const char*>(got.raw()) + i * esize,
                      static_cast<const char*>(want.raw()) + i * esize, esize) != 0) {
        return fmt::format("element {} differs bitwise", i);
      }
    }
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (!close(element(got, i), element(want, i), tol)) {
      return fmt::format("element {}: {} vs CPU {} (tolerance {})", i, element(got, i), element(want, i), tol);
    }
  }
  return "";
}

std::shared_ptr<Storage> allocate_posing_as_cuda(size_t bytes) {
  void* data = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  LATTICE_CHECK(data != nullptr, "out of host memory allocating {} bytes", bytes);
  return std::make_shared<Storage>(Device::kCuda, data, bytes, std::free);
}

}  // namespace

std::vector<OpMismatch> compare_backend_ops(Device device, bool exact, uint64_t seed) {
  const DeviceContext candidate(device);
  const DeviceContext oracle(Device::kCpu);
  std::vector<OpMismatch> found;
  uint64_t case_seed = seed;
  for (const OpCase& c : op_cases()) {
    std::vector<std::vector<int>> runs = {{}};  // the f32 run, then the bf16 ones
    runs.insert(runs.end(), c.bf16.begin(), c.bf16.end());
    for (const std::vector<int>& bf16_args : runs) {
      Inputs in(case_seed);  // every run of a case draws the same values
      const Tensors inputs = with_bf16(c.make(in), bf16_args);
      const Outcome got = run_on(candidate, c, inputs);
      const Outcome want = run_on(oracle, c, inputs);
      const std::string name = case_name(c, bf16_args);
      auto report = [&](std::string detail) { found.push_back({name, std::move(detail)}); };
      if (got.error.empty() != want.error.empty()) {
        report(fmt::format("throws on one side only: {} vs CPU {}", got.error.empty() ? "no error" : got.error,
                           want.error.empty() ? "no error" : want.error));
        continue;
      }
      const double tol = exact ? 0.0 : c.tolerance;
      for (size_t i = 0; i < got.scalars.size(); ++i) {
        if (exact ? got.scalars[i] != want.scalars[i] : !close(got.scalars[i], want.scalars[i], tol)) {
          report(fmt::format("result {}: {} vs CPU {}", i, got.scalars[i], want.scalars[i]));
        }
      }
      for (size_t i = 0; i < got.tensors.size(); ++i) {
        const std::string diff = compare(got.tensors[i], want.tensors[i], tol);
        if (!diff.empty()) report(fmt::format("tensor argument {} ({}): {}", i, want.tensors[i].describe(), diff));
      }
    }
    ++case_seed;
  }
  return found;
}

void check_stand_in_matches_cpu(const Backend& stand_in) {
  const ScopedBackend registered(Device::kCuda, &stand_in);
  const std::vector<OpMismatch> found = compare_backend_ops(Device::kCuda, /*exact=*/true, 3);
  for (const OpMismatch& m : found) FAIL_CHECK(m.op << ": " << m.detail);
  CHECK(found.empty());
}

std::vector<OpMismatch> compare_bf16_contract(Device device, const std::vector<std::string>& left_out,
                                              uint64_t seed) {
  const DeviceContext ctx(device);
  std::vector<OpMismatch> found;
  uint64_t case_seed = seed;
  for (const OpCase& c : op_cases()) {
    ++case_seed;
    if (c.rounds_twice || std::find(left_out.begin(), left_out.end(), c.op) != left_out.end()) continue;
    for (const std::vector<int>& bf16_args : c.bf16) {
      Inputs in(case_seed);
      const Tensors inputs = with_bf16(c.make(in), bf16_args);
      const Outcome got = run_on(ctx, c, inputs);
      const Outcome want = run_on(ctx, c, widened(inputs));
      const std::string name = case_name(c, bf16_args);
      auto report = [&](std::string detail) { found.push_back({name, std::move(detail)}); };
      if (got.error.empty() != want.error.empty()) {
        report(fmt::format("throws on one side only: {} vs widened {}", got.error.empty() ? "no error" : got.error,
                           want.error.empty() ? "no error" : want.error));
        continue;
      }
      if (got.scalars != want.scalars) report("scalars differ from the widened run's");
      for (size_t i = 0; i < got.tensors.size(); ++i) {
        const Tensor rounded = inputs[i].dtype() == DType::kBF16 ? with_bf16({want.tensors[i]}, {0})[0]
                                                                 : want.tensors[i];
        const std::string diff = compare(got.tensors[i], rounded, 0.0);
        if (!diff.empty()) report(fmt::format("tensor argument {} ({}): {}", i, inputs[i].describe(), diff));
      }
    }
  }
  return found;
}

std::vector<std::string> harness_op_names() {
  std::vector<std::string> names;
  for (const OpCase& c : op_cases()) {
    if (std::find(names.begin(), names.end(), c.op) == names.end()) names.push_back(c.op);
  }
  return names;
}

std::set<std::string> declared_op_names() {
  std::ifstream in("kernels/ops.h");
  LATTICE_CHECK(in.good(), "kernels/ops.h is not readable from {}: the test needs it as data",
                std::filesystem::current_path().string());
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::set<std::string> declared;
  const std::regex decl(R"(\n(?:void|double) (\w+)\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), decl); it != std::sregex_iterator(); ++it) {
    declared.insert((*it)[1]);
  }
  return declared;
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF64: return t.f64()[i];
    case DType::kBF16: return bfloat16_to_float(t.bf16()[i]);
    default: return t.f32()[i];
  }
}

std::string case_name(const OpCase& c, const std::vector<int>& bf16_args) {
  std::string what = c.what;
  if (!bf16_args.empty()) what += fmt::format("{}bf16 {}", what.empty() ? "" : ", ", fmt::join(bf16_args, ","));
  return what.empty() ? c.op : fmt::format("{} ({})", c.op, what);
}

Tensors with_bf16(const Tensors& t, const std::vector<int>& bf16_args) {
  Tensors out;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool round = std::find(bf16_args.begin(), bf16_args.end(), static_cast<int>(i)) != bf16_args.end();
    out.push_back(Tensor::empty(t[i].shape(), round ? DType::kBF16 : t[i].dtype()));
    ops::cast(t[i], out.back());
  }
  return out;
}

Tensors widened(const Tensors& t) {
  Tensors out;
  for (const Tensor& x : t) {
    out.push_back(Tensor::empty(x.shape(), x.dtype() == DType::kBF16 ? DType::kF32 : x.dtype()));
    ops::cast(x, out.back());
  }
  return out;
}

Backend cuda_stand_in() {
  Backend b = cpu::backend();
  b.device = Device::kCuda;
  b.allocate = &allocate_posing_as_cuda;
  return b;
}

}  // namespace lattice::test
