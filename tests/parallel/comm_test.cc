// Multi-rank tests of MpiCommunicator and the grid's process groups (run under mpirun -np 4 and
// -np 8): every result is checked against values computed locally from rank numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

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

TEST_CASE("bf16 tensors move bit for bit; reducing them is an error that says so") {
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
  CHECK_THROWS_WITH(w.all_reduce(in), Catch::Contains("all_reduce: MPI cannot reduce bf16"));
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

TEST_CASE("all_to_all transposes blocks") {
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
