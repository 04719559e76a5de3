// Multi-rank tests of MpiCommunicator and the grid's process groups (run under mpirun -np 4 and
// -np 8): every result is checked against values computed locally from rank numbers. bf16
// reductions also run on groups of 2 and 4 ranks split from the world.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/error.h"
#include "parallel/grid.h"
#include "parallel/mpi_communicator.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

Tensor f32_from(const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kF32);
  std::copy(values.begin(), values.end(), t.f32());
  return t;
}

std::vector<float> f32_values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }
std::vector<int32_t> i32_values(const Tensor& t) { return std::vector<int32_t>(t.i32(), t.i32() + t.numel()); }

// Resets max_count even when an assertion throws.
struct MaxCountGuard {
  MpiCommunicator& comm;
  int64_t saved;
  MaxCountGuard(MpiCommunicator& c, int64_t n) : comm(c), saved(c.max_count()) { comm.set_max_count(n); }
  ~MaxCountGuard() { comm.set_max_count(saved); }
};

TEST_CASE("world communicator knows its rank, size and members") {
  auto& w = world();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(w.rank() == rank);
  CHECK(w.size() == size);
  CHECK(w.name() == "world");
  std::vector<int> all(size);
  std::iota(all.begin(), all.end(), 0);
  CHECK(w.world_ranks() == all);
  CHECK_THAT(w.describe(), Catch::Contains("group 'world' (world ranks [0, 1,"));
}

TEST_CASE("all_reduce sum, max and min on f32 and i32, in place") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  const int64_t k = 5;
  const int rank_sum = n * (n - 1) / 2;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    Tensor f = Tensor::empty({k}, DType::kF32);
    Tensor i = Tensor::empty({k}, DType::kI32);
    for (int64_t e = 0; e < k; ++e) {
      f.f32()[e] = static_cast<float>(10 * r + e) * (e % 2 ? -1.f : 1.f);
      i.i32()[e] = static_cast<int32_t>(10 * r + e) * (e % 2 ? -1 : 1);
    }
    w.all_reduce(f, op);
    w.all_reduce(i, op);
    for (int64_t e = 0; e < k; ++e) {
      const int sign = e % 2 ? -1 : 1;
      int expected = 0;
      if (op == ReduceOp::kSum) expected = sign * (10 * rank_sum + n * static_cast<int>(e));
      // sign flips which end of the rank range is the max
      if (op == ReduceOp::kMax) expected = sign > 0 ? 10 * (n - 1) + e : -static_cast<int>(e);
      if (op == ReduceOp::kMin) expected = sign > 0 ? static_cast<int>(e) : -(10 * (n - 1) + static_cast<int>(e));
      INFO("op " << reduce_op_name(op) << " element " << e);
      CHECK(f.f32()[e] == static_cast<float>(expected));
      CHECK(i.i32()[e] == expected);
    }
  }
}

TEST_CASE("all_reduce of a view changes only the view's elements") {
  auto& w = world();
  Tensor t = Tensor::empty({4, 3}, DType::kF32);
  std::fill(t.f32(), t.f32() + 12, 1.0f);
  w.all_reduce(t.rows(1, 3));
  std::vector<float> got = f32_values(t);
  for (int e = 0; e < 12; ++e) CHECK(got[e] == ((e >= 3 && e < 9) ? float(w.size()) : 1.0f));
}

TEST_CASE("large messages are chunked below MPI's count limit") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  MaxCountGuard guard(w, 3);
  // 10 elements in chunks of 3: all_reduce, broadcast and a send/recv ring.
  Tensor t = Tensor::empty({10}, DType::kF32);
  for (int e = 0; e < 10; ++e) t.f32()[e] = static_cast<float>(r * 100 + e);
  w.all_reduce(t);
  for (int e = 0; e < 10; ++e) CHECK(t.f32()[e] == static_cast<float>(100 * n * (n - 1) / 2 + n * e));

  Tensor b = Tensor::empty({10}, DType::kI32);
  for (int e = 0; e < 10; ++e) b.i32()[e] = r == 1 ? 7 * e : -1;
  w.broadcast(b, 1);
  for (int e = 0; e < 10; ++e) CHECK(b.i32()[e] == 7 * e);

  Tensor out = Tensor::empty({10}, DType::kF32);
  CommHandle rx = w.recv_async(out, (r + n - 1) % n, 5);
  CommHandle tx = w.send_async(t.view({2, 5}), (r + 1) % n, 5);
  tx.wait();
  rx.wait();
  CHECK(f32_values(out) == f32_values(t));

  // Collectives with per-rank blocks cannot be chunked: a clear error before any communication.
  Tensor in = Tensor::zeros({4});
  Tensor gathered = Tensor::zeros({4 * n});
  CHECK_THROWS_WITH(w.all_gather(in, gathered),
                    Catch::Contains("all_gather on group 'world'") && Catch::Contains("count limit of 3"));
}

TEST_CASE("reduce_scatter sums and gives rank r the r-th block") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  const int k = 3;
  Tensor in = Tensor::empty({n * k}, DType::kF32);
  for (int j = 0; j < n * k; ++j) in.f32()[j] = static_cast<float>(r * 100 + j);
  Tensor out = Tensor::empty({k}, DType::kF32);
  w.reduce_scatter(in, out);
  for (int e = 0; e < k; ++e) CHECK(out.f32()[e] == static_cast<float>(100 * n * (n - 1) / 2 + n * (r * k + e)));

  Tensor wrong = Tensor::zeros({k + 1});
  CHECK_THROWS_WITH(w.reduce_scatter(in, wrong), Catch::Contains("reduce_scatter on group 'world'"));
}

TEST_CASE("all_gather concatenates in rank order") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  const int k = 3;
  Tensor in = Tensor::empty({k}, DType::kI32);
  for (int e = 0; e < k; ++e) in.i32()[e] = r * 10 + e;
  Tensor out = Tensor::empty({n, k}, DType::kI32);
  w.all_gather(in, out);
  std::vector<int32_t> got = i32_values(out);
  for (int q = 0; q < n; ++q)
    for (int e = 0; e < k; ++e) CHECK(got[q * k + e] == q * 10 + e);
}

TEST_CASE("bf16 tensors move bit for bit") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  Tensor in = Tensor::empty({2}, DType::kBF16);
  in.bf16()[0] = static_cast<uint16_t>(0x3f80 + r);  // 1.0 plus r ulps: distinct bit patterns per rank
  in.bf16()[1] = 0x7fc0;                              // a quiet NaN survives as bits
  Tensor out = Tensor::empty({n, 2}, DType::kBF16);
  w.all_gather(in, out);
  for (int q = 0; q < n; ++q) {
    CHECK(out.bf16()[2 * q] == 0x3f80 + q);
    CHECK(out.bf16()[2 * q + 1] == 0x7fc0);
  }
}

// One combine of a bf16 sum: both operands widened to f32, added, rounded to nearest even.
uint16_t bf16_add(uint16_t a, uint16_t b) { return float_to_bfloat16(bfloat16_to_float(a) + bfloat16_to_float(b)); }

// Every result a bf16 sum of `values` can have when each combine rounds, over all orders and
// groupings: MPI may combine a commutative op in any tree. By subsets: the sums of a set of leaves
// are the combines of the sums of any split of it into two parts.
std::set<uint16_t> bf16_sums(const std::vector<uint16_t>& values) {
  const unsigned full = (1u << values.size()) - 1;
  std::vector<std::set<uint16_t>> sums(full + 1);
  for (unsigned mask = 1; mask <= full; ++mask) {
    if ((mask & (mask - 1)) == 0) {
      sums[mask] = {values[std::countr_zero(mask)]};
      continue;
    }
    const unsigned low = mask & -mask;  // in the first part, so each split is counted once
    for (unsigned a = (mask - 1) & mask; a != 0; a = (a - 1) & mask) {
      if (!(a & low)) continue;
      for (uint16_t x : sums[a])
        for (uint16_t y : sums[mask ^ a]) sums[mask].insert(bf16_add(x, y));
    }
  }
  return sums[full];
}

// Group rank q's bf16 value at element e: mixed signs and magnitudes, so that sums round. Elements 0
// and 1 are round-half-even cases: 1 + 2^-8 (a tie between 1 and 1 + 2^-7, to the even 1) and
// 1 + 2^-7 + 2^-8 (a tie, to the even 1 + 2^-6).
uint16_t bf16_value(int q, int64_t e) {
  if (e == 0) return q == 0 ? 0x3f80 : 0x3b80;  // 1, 2^-8
  if (e == 1) return q == 0 ? 0x3f81 : 0x3b80;  // 1 + 2^-7, 2^-8
  const float magnitude = std::ldexp(1.0f + 0.1f * (q + 1) + 0.013f * e, static_cast<int>((e + q) % 4) - 1);
  return float_to_bfloat16((e + q) % 3 == 0 ? -magnitude : magnitude);
}

// `got` is the bf16 sum over the group of bf16_value(q, e): for 2 ranks exactly the one rounding of
// the pair's sum; for more, the result of some combine order, and within the bound of size - 1
// roundings (each at most 2^-8 of a partial sum, itself at most the sum of magnitudes M up to a
// factor (1 + 2^-8)^size).
void check_bf16_sum(uint16_t got, int size, int64_t e) {
  std::vector<uint16_t> values;
  double exact = 0.0, magnitudes = 0.0;
  for (int q = 0; q < size; ++q) {
    values.push_back(bf16_value(q, e));
    exact += bfloat16_to_float(values.back());
    magnitudes += std::fabs(bfloat16_to_float(values.back()));
  }
  INFO("group size " << size << ", element " << e << ", got 0x" << std::hex << got);
  if (size == 2) {
    CHECK(got == bf16_add(values[0], values[1]));
    if (e == 0) CHECK(got == 0x3f80);
    if (e == 1) CHECK(got == 0x3f82);
  } else {
    CHECK(bf16_sums(values).count(got) == 1);
  }
  CHECK(std::fabs(bfloat16_to_float(got) - exact) <= (size - 1) * std::ldexp(magnitudes, -8) * 1.05);
}

// Groups of 2 and 4 consecutive ranks, and the world when it is larger (the world is 4 or 8 ranks).
std::vector<std::unique_ptr<Communicator>> bf16_test_groups(MpiCommunicator& w) {
  std::vector<int> sizes = {2, 4};
  if (w.size() > 4) sizes.push_back(w.size());
  std::vector<std::unique_ptr<Communicator>> groups;
  for (int size : sizes) groups.push_back(w.split(w.rank() / size, w.rank(), "bf16_" + std::to_string(size), ""));
  return groups;
}

TEST_CASE("bf16 all_reduce: sum rounds every combine, max and min are exact, every rank agrees") {
  auto groups = bf16_test_groups(world());
  for (auto& g : groups) {
    const int n = g->size(), q = g->rank();
    const int64_t k = 12;
    Tensor sum = Tensor::empty({k}, DType::kBF16), largest = Tensor::empty({k}, DType::kBF16);
    Tensor smallest = Tensor::empty({k}, DType::kBF16);
    for (int64_t e = 0; e < k; ++e) sum.bf16()[e] = largest.bf16()[e] = smallest.bf16()[e] = bf16_value(q, e);
    CommHandle h = g->all_reduce_async(sum);
    g->all_reduce(largest, ReduceOp::kMax);
    h.wait();
    g->all_reduce(smallest, ReduceOp::kMin);
    Tensor all = Tensor::empty({n, k}, DType::kBF16);
    g->all_gather(sum, all);
    for (int64_t e = 0; e < k; ++e) {
      check_bf16_sum(sum.bf16()[e], n, e);
      float hi = -INFINITY, lo = INFINITY;
      for (int p = 0; p < n; ++p) {
        hi = std::max(hi, bfloat16_to_float(bf16_value(p, e)));
        lo = std::min(lo, bfloat16_to_float(bf16_value(p, e)));
        CHECK(all.bf16()[p * k + e] == sum.bf16()[e]);
      }
      CHECK(largest.bf16()[e] == float_to_bfloat16(hi));
      CHECK(smallest.bf16()[e] == float_to_bfloat16(lo));
    }
  }
}

TEST_CASE("bf16 all_reduce in chunks below MPI's count limit") {
  auto& w = world();
  MaxCountGuard guard(w, 5);
  Tensor t = Tensor::empty({12}, DType::kBF16);
  for (int64_t e = 0; e < 12; ++e) t.bf16()[e] = bf16_value(w.rank(), e);
  w.all_reduce(t);
  for (int64_t e = 0; e < 12; ++e) check_bf16_sum(t.bf16()[e], w.size(), e);
}

TEST_CASE("bf16 reduce_scatter sums in bf16 and gives group rank q the q-th block") {
  auto groups = bf16_test_groups(world());
  for (auto& g : groups) {
    const int n = g->size(), q = g->rank();
    const int64_t k = 5;
    Tensor in = Tensor::empty({n * k}, DType::kBF16);
    for (int64_t j = 0; j < n * k; ++j) in.bf16()[j] = bf16_value(q, j);
    Tensor sync = Tensor::empty({k}, DType::kBF16), async = Tensor::empty({k}, DType::kBF16);
    g->reduce_scatter(in, sync);
    g->reduce_scatter_async(in, async).wait();
    for (int64_t e = 0; e < k; ++e) {
      check_bf16_sum(sync.bf16()[e], n, q * k + e);
      check_bf16_sum(async.bf16()[e], n, q * k + e);
    }
  }
}

TEST_CASE("broadcast from a non-zero root") {
  auto& w = world();
  const int root = w.size() - 1;
  Tensor t = Tensor::empty({2, 3}, DType::kF32);
  for (int e = 0; e < 6; ++e) t.f32()[e] = w.rank() == root ? 0.5f + e : -1.0f;
  w.broadcast(t, root);
  for (int e = 0; e < 6; ++e) CHECK(t.f32()[e] == 0.5f + e);
  CHECK_THROWS_WITH(w.broadcast(t, w.size()), Catch::Contains("root") && Catch::Contains("not a rank"));
}

TEST_CASE("send/recv around a ring, and a short message is an error") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor out = Tensor::empty({4}, DType::kF32);
  Tensor in = Tensor::empty({4}, DType::kF32);
  for (int e = 0; e < 4; ++e) out.f32()[e] = static_cast<float>(1000 * r + e);
  // Even ranks send first, odd ranks receive first: the sync forms must not deadlock.
  if (r % 2 == 0) {
    w.send(out, next, 3);
    w.recv(in, prev, 3);
  } else {
    w.recv(in, prev, 3);
    w.send(out, next, 3);
  }
  for (int e = 0; e < 4; ++e) CHECK(in.f32()[e] == static_cast<float>(1000 * prev + e));

  // The receiver expects 4 elements, the sender sends 3.
  Tensor three = Tensor::zeros({3});
  CommHandle tx = w.send_async(three, next, 4);
  CHECK_THROWS_WITH(w.recv(in, prev, 4), Catch::Contains("the message had 3 elements, expected 4"));
  tx.wait();
}

TEST_CASE("all_to_all transposes blocks, and refuses aliased or mismatched buffers") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  const int k = 2;
  Tensor in = Tensor::empty({n * k}, DType::kF32);
  for (int j = 0; j < n; ++j)
    for (int e = 0; e < k; ++e) in.f32()[j * k + e] = static_cast<float>(r * 100 + j * 10 + e);
  Tensor out = Tensor::empty({n * k}, DType::kF32);
  w.all_to_all(in, out);
  // Block i of rank r's output = block r of rank i's input.
  for (int i = 0; i < n; ++i)
    for (int e = 0; e < k; ++e) CHECK(out.f32()[i * k + e] == static_cast<float>(i * 100 + r * 10 + e));
  // No in-place form (MPI_Alltoall's buffers must not alias): one error naming it, not garbage.
  CHECK_THROWS_WITH(w.all_to_all(in, in), Catch::Contains("all_to_all has no in-place form"));
  CHECK_THROWS_WITH(w.all_to_all(in, Tensor::empty({n * k + 1}, DType::kF32)),
                    Catch::Contains("must have the same dtype and element count"));
}

TEST_CASE("barrier completes") {
  world().barrier();
  CommHandle h = world().barrier_async();
  while (!h.test()) {
  }
  CHECK_FALSE(h.pending());
}

TEST_CASE("two outstanding handles complete in reverse order") {
  auto& w = world();
  const int n = w.size(), r = w.rank();
  Tensor a = f32_from({float(r), 1.0f});
  Tensor b = Tensor::empty({3}, DType::kI32);
  for (int e = 0; e < 3; ++e) b.i32()[e] = r * e;
  Tensor gathered = Tensor::empty({n}, DType::kF32);
  Tensor mine = f32_from({float(r * r)});
  std::vector<CommHandle> handles;
  handles.push_back(w.all_reduce_async(a));
  handles.push_back(w.all_reduce_async(b, ReduceOp::kMax));
  handles.push_back(w.all_gather_async(mine, gathered));
  // The handle holds the tensors: dropping ours must not free the storage MPI writes into.
  mine = Tensor();
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) it->wait();
  CHECK(a.f32()[0] == float(n * (n - 1) / 2));
  CHECK(a.f32()[1] == float(n));
  for (int e = 0; e < 3; ++e) CHECK(b.i32()[e] == (n - 1) * e);
  for (int q = 0; q < n; ++q) CHECK(gathered.f32()[q] == float(q * q));

  // A moved-from handle is complete; destroying a pending handle waits for it.
  Tensor c = f32_from({1.0f});
  {
    CommHandle h1 = w.all_reduce_async(c);
    CommHandle h2 = std::move(h1);
    CHECK_FALSE(h1.pending());
  }
  CHECK(c.f32()[0] == float(n));
}

// Group sums: every rank contributes world rank + 1; a group's sum counts only its members.
void check_groups(const RankGrid& grid, const ProcessGroups& groups) {
  auto check_group = [&](Communicator* comm, const std::string& name, std::vector<int> members,
                         int my_index) {
    INFO("group " << name << " on rank " << grid.rank() << " (" << grid.describe() << ")");
    REQUIRE(comm != nullptr);
    CHECK(comm->name() == name);
    CHECK(comm->world_ranks() == members);
    CHECK(comm->size() == static_cast<int>(members.size()));
    CHECK(comm->rank() == my_index);
    Tensor t = f32_from({float(grid.rank() + 1)});
    comm->all_reduce(t);
    float expected = 0;
    for (int m : members) expected += float(m + 1);
    CHECK(t.f32()[0] == expected);
  };
  const GridCoords& c = grid.coords();
  check_group(groups.tp.get(), "tp", grid.tp_group(), c.tp);
  check_group(groups.dp.get(), "dp", grid.dp_group(), c.dp);
  check_group(groups.pp.get(), "pp", grid.pp_group(), c.pp);
  if (grid.in_embedding_group()) {
    check_group(groups.embedding.get(), "embedding", grid.embedding_group(), grid.is_first_stage() ? 0 : 1);
  } else {
    CHECK(groups.embedding == nullptr);
  }
}

TEST_CASE("process groups for TP2 x PP2 x DP(world/4)") {
  auto& w = world();
  REQUIRE(w.size() % 4 == 0);
  RankGrid grid(w.size(), w.rank(), 2, 2);
  ProcessGroups groups = make_process_groups(grid, w);
  check_groups(grid, groups);
  if (w.size() == 8) {
    // The explicit layout of the brief: rank = tp + 2 (dp + 2 pp).
    const std::vector<std::vector<int>> tp = {{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 5}, {4, 5}, {6, 7}, {6, 7}};
    const std::vector<std::vector<int>> dp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}};
    const std::vector<std::vector<int>> pp = {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}};
    CHECK(groups.tp->world_ranks() == tp[w.rank()]);
    CHECK(groups.dp->world_ranks() == dp[w.rank()]);
    CHECK(groups.pp->world_ranks() == pp[w.rank()]);
    CHECK(groups.embedding->world_ranks() == pp[w.rank()]);
    if (w.rank() == 5) CHECK(groups.tp->describe() == "group 'tp' (world ranks [4, 5]; pp 1, dp 0)");
  }
  // Groups work concurrently: a tp and a dp all_reduce in flight together.
  Tensor a = f32_from({1.0f});
  Tensor b = f32_from({1.0f});
  CommHandle ha = groups.tp->all_reduce_async(a);
  CommHandle hb = groups.dp->all_reduce_async(b);
  hb.wait();
  ha.wait();
  CHECK(a.f32()[0] == float(grid.tp_size()));
  CHECK(b.f32()[0] == float(grid.dp_size()));
}

TEST_CASE("process groups for PP4 (middle stages have no embedding group)") {
  auto& w = world();
  REQUIRE(w.size() % 4 == 0);
  RankGrid grid(w.size(), w.rank(), w.size() / 4, 4, 1);
  ProcessGroups groups = make_process_groups(grid, w);
  check_groups(grid, groups);
  CHECK((groups.embedding != nullptr) == (grid.pp_rank() == 0 || grid.pp_rank() == 3));
}

TEST_CASE("process groups for pure data parallelism") {
  auto& w = world();
  RankGrid grid(w.size(), w.rank(), 1, 1);
  ProcessGroups groups = make_process_groups(grid, w);
  check_groups(grid, groups);
  CHECK(groups.dp->size() == w.size());
  CHECK(groups.embedding->size() == 1);
}

}  // namespace
}  // namespace lattice
