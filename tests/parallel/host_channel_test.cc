// The host control channel under mpirun (2 and 4 ranks): typed gathers and broadcasts, exact sums
// with the same bits on every rank in group-rank order, votes, reports, and the watchdog on a hang.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/error.h"
#include "parallel/exact_sum.h"
#include "parallel/mpi_communicator.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

struct Mixed {
  int32_t rank;
  double value;
  char tag[3];
};

uint64_t bits(double d) {
  uint64_t b = 0;
  std::memcpy(&b, &d, sizeof(d));
  return b;
}

TEST_CASE("host channel: typed all_gather and broadcast") {
  HostChannel& host = world().host();
  const int n = host.size(), r = host.rank();
  REQUIRE(n == world().size());
  CHECK(host.rank() == world().rank());
  const std::vector<Mixed> all = host.all_gather(Mixed{r, 0.5 * r, {'a', static_cast<char>('a' + r), 'z'}}, "test");
  REQUIRE(all.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CHECK(all[i].rank == i);
    CHECK(all[i].value == 0.5 * i);
    CHECK(all[i].tag[1] == static_cast<char>('a' + i));
  }
  for (int root = 0; root < n; ++root) {
    const Mixed got = host.broadcast(Mixed{r, 1.0 + r, {'x', 'y', 'z'}}, root, "test");
    CHECK(got.rank == root);
    CHECK(got.value == 1.0 + root);
  }
  CHECK(host.max<int64_t>(int64_t{10} * r - 7, "test") == int64_t{10} * (n - 1) - 7);
  CHECK(host.min(-0.25 * r, "test") == -0.25 * (n - 1));
  CHECK_THROWS_AS(host.broadcast(1, n, "test"), Error);
}

TEST_CASE("host channel: exact sums in group-rank order, the same bits on every rank") {
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  // Values whose sum depends on the order in which they are added.
  auto part = [](int i) { return i % 2 == 0 ? 1e16 * (i % 4 == 0 ? 1 : -1) : 1.0 + 0.1 * i; };
  double expected = 0.0;
  for (int i = 0; i < n; ++i) expected += part(i);
  const double sum = exact_sum(w, part(r));
  CHECK(bits(sum) == bits(expected));
  for (uint64_t b : w.host().all_gather(bits(sum), "test")) CHECK(b == bits(expected));
  for (int root = 0; root < n; ++root) CHECK(bits(broadcast_double(w, 0.1 * r + 1e-17, root)) == bits(0.1 * root + 1e-17));
}

TEST_CASE("host channel: stop and commit votes") {
  HostChannel& host = world().host();
  const int n = host.size(), r = host.rank();
  CHECK_FALSE(host.any(false, "stop vote"));
  for (int voter = 0; voter < n; ++voter) CHECK(host.any(r == voter, "stop vote"));
  // Commit: -1 failed, 0 still writing, 1 durable; the job commits only when min == 1.
  CHECK(host.min(1, "commit vote") == 1);
  CHECK(host.min(r == n - 1 ? 0 : 1, "commit vote") == 0);
  CHECK(host.min(r == 0 ? -1 : (r % 2), "commit vote") == -1);
}

TEST_CASE("host channel: every rank's report reaches the root in rank order") {
  HostChannel& host = world().host();
  const int n = host.size(), r = host.rank();
  auto report = [](int i) { return i == 1 ? std::string() : std::string(static_cast<size_t>(3 * i + 1), 'a' + i); };
  for (int root = 0; root < n; ++root) {
    const std::vector<std::string> got = host.gather_strings(report(r), root, "test");
    if (r != root) {
      CHECK(got.empty());
      continue;
    }
    REQUIRE(got.size() == static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) CHECK(got[i] == report(i));
  }
  host.barrier("test");
}

TEST_CASE("host channel: the watchdog covers its waits and names the group and the value") {
  // A group of its own, whose watchdog throws instead of ending the job.
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto watchdog = std::make_shared<Watchdog>(0.2, [](const HangReport&) {});
  MpiCommunicator group(comm, "late", "test", watchdog);
  if (group.rank() == 0) {
    try {
      group.host().barrier("test vote");
      FAIL("the barrier did not time out");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("rank 0: host all_gather of 1 B (test vote) on group 'late' (world ranks"));
    }
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    group.host().barrier("test vote");  // completes rank 0's abandoned request
  }
  world().host().barrier("test");
}

}  // namespace
}  // namespace lattice
