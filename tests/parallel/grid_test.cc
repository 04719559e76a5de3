// RankGrid without MPI: coordinates, group members and layout errors for several layouts; and the
// watchdog's timeout on a fake operation that never completes.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <thread>

#include "kernels/error.h"
#include "parallel/communicator.h"
#include "parallel/grid.h"
#include "parallel/watchdog.h"

namespace lattice {
namespace {

TEST_CASE("TP2 x PP2 x DP2: coordinates and groups, TP fastest then DP then PP") {
  RankGrid g(8, 5, 2, 2, 2);
  CHECK(g.coords() == GridCoords{1, 0, 1});
  CHECK(g.tp_group() == std::vector<int>{4, 5});
  CHECK(g.dp_group() == std::vector<int>{5, 7});
  CHECK(g.pp_group() == std::vector<int>{1, 5});
  CHECK(g.embedding_group() == std::vector<int>{1, 5});
  CHECK(g.is_last_stage());
  CHECK_FALSE(g.is_first_stage());
  CHECK(g.describe() == "tp 1/2, pp 1/2, dp 0/2");
  CHECK(RankGrid(8, 2, 2, 2).coords() == GridCoords{0, 1, 0});
}

TEST_CASE("every layout: coordinates round-trip and the groups partition the world") {
  struct Layout { int world, tp, pp, dp; };
  for (Layout l : {Layout{8, 2, 2, 2}, Layout{12, 2, 3, 0}, Layout{16, 4, 2, 0}, Layout{6, 1, 3, 2},
                   Layout{4, 4, 1, 1}, Layout{1, 1, 1, 0}, Layout{24, 2, 4, 3}}) {
    INFO("world " << l.world << " tp " << l.tp << " pp " << l.pp << " dp " << l.dp);
    std::set<std::vector<int>> tp_groups, dp_groups, pp_groups, emb_groups;
    int dp = 0;
    for (int r = 0; r < l.world; ++r) {
      RankGrid g(l.world, r, l.tp, l.pp, l.dp);
      dp = g.dp_size();
      CHECK(g.tp_size() * g.pp_size() * g.dp_size() == l.world);
      CHECK(g.rank_of(g.coords()) == r);
      CHECK(g.coords_of(r) == g.coords());
      // Each group contains this rank at the index of its varying coordinate, and the other
      // coordinates are constant across the group.
      CHECK(g.tp_group()[g.tp_rank()] == r);
      CHECK(g.dp_group()[g.dp_rank()] == r);
      CHECK(g.pp_group()[g.pp_rank()] == r);
      for (int m : g.tp_group()) CHECK((g.coords_of(m).dp == g.dp_rank() && g.coords_of(m).pp == g.pp_rank()));
      for (int m : g.dp_group()) CHECK((g.coords_of(m).tp == g.tp_rank() && g.coords_of(m).pp == g.pp_rank()));
      for (int m : g.pp_group()) CHECK((g.coords_of(m).tp == g.tp_rank() && g.coords_of(m).dp == g.dp_rank()));
      // TP neighbours are consecutive ranks (one node).
      CHECK(g.tp_group().back() - g.tp_group().front() == g.tp_size() - 1);
      tp_groups.insert(g.tp_group());
      dp_groups.insert(g.dp_group());
      pp_groups.insert(g.pp_group());
      if (g.in_embedding_group()) {
        auto e = g.embedding_group();
        CHECK(e.front() == g.pp_group().front());
        CHECK(e.back() == g.pp_group().back());
        CHECK(e.size() == (l.pp == 1 ? 1u : 2u));
        emb_groups.insert(e);
      } else {
        CHECK(g.embedding_group().empty());
      }
    }
    CHECK(tp_groups.size() == static_cast<size_t>(l.world / l.tp));
    CHECK(dp_groups.size() == static_cast<size_t>(l.world / dp));
    CHECK(pp_groups.size() == static_cast<size_t>(l.world / l.pp));
    CHECK(emb_groups.size() == pp_groups.size());
  }
}

TEST_CASE("PP4: middle stages are in no embedding group; PP1: the embedding group is the rank") {
  CHECK(RankGrid(4, 0, 1, 4).embedding_group() == std::vector<int>{0, 3});
  CHECK(RankGrid(4, 3, 1, 4).embedding_group() == std::vector<int>{0, 3});
  CHECK(RankGrid(4, 1, 1, 4).embedding_group().empty());
  CHECK_FALSE(RankGrid(4, 2, 1, 4).in_embedding_group());
  CHECK(RankGrid(4, 3, 2, 1).embedding_group() == std::vector<int>{3});
}

TEST_CASE("parallel.data left out is world / (tensor x pipeline)") {
  CHECK(RankGrid(12, 0, 2, 3).dp_size() == 2);
  CHECK(RankGrid(12, 0, 2, 3, 0).dp_size() == 2);
  CHECK(RankGrid(1, 0, 1, 1).dp_size() == 1);
}

TEST_CASE("layout errors name the fields and the rank count") {
  CHECK_THROWS_AS(RankGrid(6, 0, 2, 2, 2), InputError);
  CHECK_THROWS_WITH(RankGrid(6, 0, 2, 2, 2),
                    Catch::Contains("parallel.tensor × parallel.pipeline × parallel.data = 2 × 2 × 2 = 8 "
                                    "but the job has 6 ranks (mpirun -np / srun -n; validate: --world-size)"));
  CHECK_THROWS_AS(RankGrid(6, 0, 4, 1), InputError);
  CHECK_THROWS_WITH(RankGrid(6, 0, 4, 1),
                    Catch::Contains("6 ranks (mpirun -np / srun -n; validate: --world-size), which is not divisible "
                                    "by parallel.tensor × parallel.pipeline = 4 × 1 = 4"));
  CHECK_THROWS_WITH(RankGrid(4, 0, 0, 1), Catch::Contains("parallel.tensor must be at least 1"));
  CHECK_THROWS_WITH(RankGrid(4, 0, 1, -2), Catch::Contains("parallel.pipeline must be at least 1"));
  CHECK_THROWS_WITH(RankGrid(4, 0, 1, 1, -1), Catch::Contains("parallel.data must be at least 1"));
  try {
    RankGrid(6, 0, 2, 2, 2);
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kBadInput);
  }
}

// Completes after `polls` calls to test(); never when polls < 0.
class FakeOp : public PendingOp {
 public:
  explicit FakeOp(int polls) : polls_(polls) {}
  bool test() override { return polls_ >= 0 && ++count_ > polls_; }
  OpDescription describe() const override {
    return {1, "group 'tp' (world ranks [0, 1]; pp 0, dp 0)", "all_reduce(sum) of f32[1024] (4 KiB)"};
  }
  int count() const { return count_; }

 private:
  int polls_;
  int count_ = 0;
};

TEST_CASE("watchdog: a wait past the timeout reports rank, group, operation and time once") {
  int calls = 0;
  HangReport seen;
  Watchdog dog(0.05, [&](const HangReport& r) {
    ++calls;
    seen = r;
  });
  FakeOp never(-1);
  auto start = std::chrono::steady_clock::now();
  try {
    dog.wait(never);
    FAIL("wait returned");
  } catch (const Error& e) {
    CHECK(static_cast<int>(e.code()) == kHungCollectiveExitCode);
    CHECK(std::string(e.what()) == seen.message);
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(calls == 1);
  CHECK(seen.waited_s >= 0.05);
  CHECK(took < 1.0);
  CHECK(seen.op.world_rank == 1);
  CHECK_THAT(seen.message, Catch::StartsWith("rank 1: all_reduce(sum) of f32[1024] (4 KiB) on group 'tp' "
                                             "(world ranks [0, 1]; pp 0, dp 0) did not complete within "
                                             "parallel.timeout_s = 0.05 s (waited 0."));
  CHECK_THAT(seen.message, Catch::Contains("exit code 3"));
}

TEST_CASE("watchdog: operations that complete in time, or with the timeout off, return normally") {
  int calls = 0;
  // 60 s: the 1000 polls back off to 500 us sleeps (~0.4 s), which took over 5 s on a 2-core machine
  // running four other processes.
  Watchdog dog(60.0, [&](const HangReport&) { ++calls; });
  FakeOp quick(1000);
  dog.wait(quick);
  CHECK(quick.count() == 1001);

  dog.set_timeout_s(0);  // off
  class Slow : public FakeOp {
   public:
    Slow() : FakeOp(-1), start_(std::chrono::steady_clock::now()) {}
    bool test() override { return std::chrono::steady_clock::now() - start_ > std::chrono::milliseconds(100); }
   private:
    std::chrono::steady_clock::time_point start_;
  } slow;
  dog.wait(slow);
  CHECK(calls == 0);
}

TEST_CASE("CommHandle waits through the watchdog; moved-from and default handles are complete") {
  auto dog = std::make_shared<Watchdog>(0.02, [](const HangReport&) {});
  CommHandle done;
  CHECK_FALSE(done.pending());
  CHECK(done.test());
  done.wait();

  CommHandle h(std::make_unique<FakeOp>(3), dog);
  CHECK(h.pending());
  CHECK_FALSE(h.test());
  CommHandle moved = std::move(h);
  CHECK_FALSE(h.pending());
  moved.wait();
  CHECK_FALSE(moved.pending());

  CommHandle hung(std::make_unique<FakeOp>(-1), dog);
  CHECK_THROWS_WITH(hung.wait(), Catch::Contains("did not complete within parallel.timeout_s = 0.02 s"));
  CHECK_FALSE(hung.pending());  // abandoned (leaked on purpose), not waited for again
}

TEST_CASE("format_bytes") {
  CHECK(format_bytes(12) == "12 B");
  CHECK(format_bytes(4096) == "4 KiB");
  CHECK(format_bytes(1.5 * 1024 * 1024) == "1.5 MiB");
}

}  // namespace
}  // namespace lattice
