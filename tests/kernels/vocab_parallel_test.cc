// The tensor-parallel kernel variants against the one-process kernels as naive reference: a
// vocab-sharded embedding lookup and its gradient, learned positions of a run of flattened tokens
// (sequence parallelism), and the vocab-parallel cross-entropy pieces combined as the tp ranks'
// all-reduces would (max, then sums) — including padding columns and a shard with no vocabulary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/test_util.h"

using namespace lattice;
using namespace lattice::test;

namespace {

Tensor ids_tensor(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32);
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i];
  return t;
}

// Rows [first, first + rows) of a [V, H] table as a [rows, H] shard; rows past V are padding
// filled with `pad` (a value that must never show up in a result).
Tensor shard_rows(const Tensor& table, int64_t first, int64_t rows, float pad) {
  const int64_t V = table.dim(0), H = table.dim(1);
  Tensor s = Tensor::empty({rows, H});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < H; ++c) s.f32()[r * H + c] = first + r < V ? table.f32()[(first + r) * H + c] : pad;
  return s;
}

}  // namespace

TEST_CASE("vocab-sharded embedding: shard lookups sum to the full lookup, gradients land on own rows") {
  const int64_t V = 20, H = 130, rows = 8;  // 3 shards of 8 rows: 8, 8 and 4 real rows (+4 padding)
  Tensor table = random_tensor({V, H}, 1);
  Tensor ids = ids_tensor({3, 0, 19, 3, 7, 8, 15, 16, 3, 12}, {2, 5});
  Tensor full = Tensor::empty({2, 5, H});
  ops::embedding_forward(ids, table, full);
  Tensor sum = filled({10, H}, 0.0f);
  Tensor dout = random_tensor({10, H}, 2);
  Tensor dfull = filled({V, H}, 0.5f);  // the same starting gradient, so the same sums in the same order
  ops::embedding_backward(ids, dout, dfull);
  for (int64_t s = 0; s < 3; ++s) {
    Tensor shard = shard_rows(table, s * rows, rows, 1e30f);
    Tensor out = Tensor::empty({10, H});
    ops::embedding_forward_shard(ids, shard, s * rows, V, out);
    ops::axpy(1.0f, out, sum);
    Tensor dshard = filled({rows, H}, 0.5f);
    ops::embedding_backward_shard(ids, dout, s * rows, V, dshard);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < H; ++c) {
        const float want = s * rows + r < V ? dfull.f32()[(s * rows + r) * H + c] : 0.5f;  // padding untouched
        REQUIRE(dshard.f32()[r * H + c] == want);
      }
    }
  }
  // Exactly one shard contributes each row, the others add 0: the sum is the lookup bit for bit.
  CHECK(max_abs_diff(sum, full) == 0.0);

  Tensor bad = ids_tensor({1, 20}, {2});
  Tensor out = Tensor::empty({2, H});
  CHECK_THROWS_AS(ops::embedding_forward_shard(bad, shard_rows(table, 16, rows, 0.0f), 16, V, out), Error);
}

TEST_CASE("positions of a run of flattened tokens match the [B, T, H] kernels") {
  const int64_t B = 3, T = 5, H = 7, P = 6;
  Tensor table = random_tensor({P, H}, 3);
  Tensor x = random_tensor({B, T, H}, 4);
  Tensor ref = clone(x);
  ops::add_position_embedding(ref, table);
  // Runs of 5 tokens (= 3 ranks of a tp-3 sequence split of 15 tokens), starting mid-sequence.
  Tensor got = clone(x);
  for (int64_t first = 0; first < B * T; first += 5) {
    Tensor run = got.view({B * T, H}).rows(first, first + 5);
    ops::add_position_embedding(run, table, T, first);
  }
  CHECK(max_abs_diff(got, ref) == 0.0);

  Tensor dx = random_tensor({B, T, H}, 5);
  Tensor dref = filled({P, H}, 0.25f);
  ops::position_embedding_backward(dx, dref);
  Tensor dsum = filled({P, H}, 0.25f);
  for (int64_t first = 0; first < B * T; first += 5) {
    ops::position_embedding_backward(dx.view({B * T, H}).rows(first, first + 5), T, first, dsum);
  }
  // Same terms, grouped by run: equal to fp32 rounding of a 3-term sum (|terms| <= 1).
  CHECK(max_abs_diff(dsum, dref) <= 1e-6);
  // Row T of the table (P > T) is never a position.
  CHECK(dsum.f32()[T * H] == 0.25f);
  // One run holding everything is the [B, T, H] kernel exactly.
  Tensor dall = filled({P, H}, 0.25f);
  ops::position_embedding_backward(dx.view({B * T, H}), T, 0, dall);
  CHECK(max_abs_diff(dall, dref) == 0.0);
}

TEST_CASE("vocab-parallel cross-entropy equals the one-process loss and gradient") {
  const int64_t N = 6, V = 20, rows = 8, shards = 3;  // valid columns 8, 8, 4; the last shard 4 padding
  for (const int64_t vocab : {V, int64_t{5}}) {  // V = 5: shards 2 and 3 hold no vocabulary at all
    INFO("vocab " << vocab);
    Tensor logits = random_tensor({N, vocab}, 6, -4.0f, 4.0f);
    logits.f32()[2] = 60.0f;  // stability: a large logit
    std::vector<int32_t> tv = {0, 4, static_cast<int32_t>(vocab - 1), 3, 3, 1};
    Tensor targets = ids_tensor(tv, {N});
    Tensor losses = Tensor::empty({N}), lse = Tensor::empty({N});
    ops::cross_entropy_forward(logits, targets, losses, lse);
    Tensor dref = Tensor::empty({N, vocab});
    ops::cross_entropy_backward(logits, targets, lse, 0.5f, dref);

    // Shard s holds columns [s·rows, (s+1)·rows); padding logits are huge, as if garbage.
    std::vector<Tensor> parts;
    std::vector<int64_t> valid;
    for (int64_t s = 0; s < shards; ++s) {
      Tensor part = Tensor::empty({N, rows});
      for (int64_t r = 0; r < N; ++r)
        for (int64_t j = 0; j < rows; ++j) {
          const int64_t col = s * rows + j;
          part.f32()[r * rows + j] = col < vocab ? logits.f32()[r * vocab + col] : 1e4f;
        }
      parts.push_back(part);
      valid.push_back(std::clamp<int64_t>(vocab - s * rows, 0, rows));
    }
    // all-reduce(max) of the shard maxima.
    Tensor row_max = filled({N}, -INFINITY), m = Tensor::empty({N});
    for (int64_t s = 0; s < shards; ++s) {
      ops::cross_entropy_shard_max(parts[s], valid[s], m);
      for (int64_t r = 0; r < N; ++r) row_max.f32()[r] = std::max(row_max.f32()[r], m.f32()[r]);
    }
    // all-reduce(sum) of [sum exp, target logit].
    Tensor sums = filled({2, N}, 0.0f), part_sums = Tensor::empty({2, N});
    for (int64_t s = 0; s < shards; ++s) {
      ops::cross_entropy_shard_sums(parts[s], targets, row_max, s * rows, valid[s], vocab, part_sums);
      ops::axpy(1.0f, part_sums, sums);
    }
    Tensor tp_losses = Tensor::empty({N}), tp_lse = Tensor::empty({N});
    ops::cross_entropy_shard_loss(row_max, sums, tp_losses, tp_lse);
    for (int64_t r = 0; r < N; ++r) {
      CHECK(tp_losses.f32()[r] == Approx(losses.f32()[r]).epsilon(1e-6));
      CHECK(tp_lse.f32()[r] == Approx(lse.f32()[r]).epsilon(1e-6));
    }
    for (int64_t s = 0; s < shards; ++s) {
      Tensor d = clone(parts[s]);  // in place, as the head does
      ops::cross_entropy_shard_backward(d, targets, tp_lse, 0.5f, s * rows, valid[s], vocab, d);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t j = 0; j < rows; ++j) {
          const int64_t col = s * rows + j;
          const float got = d.f32()[r * rows + j];
          if (col < vocab) {
            REQUIRE(std::abs(got - dref.f32()[r * vocab + col]) <= 1e-6f);
          } else {
            REQUIRE(got == 0.0f);  // padding: no gradient
          }
        }
    }
  }
  // Targets are checked against the whole vocabulary.
  Tensor part = random_tensor({2, rows}, 7), row_max = filled({2}, 1.0f), sums = Tensor::empty({2, 2});
  CHECK_THROWS_AS(ops::cross_entropy_shard_sums(part, ids_tensor({0, 20}, {2}), row_max, 0, rows, V, sums), Error);
}
