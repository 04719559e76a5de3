// The two waits of a CommHandle on CPU tensors under mpirun (2 and 4 ranks): events recorded at
// enqueue and completion; a stream wait completes the operation (CPU work runs inline), under the
// watchdog like a host wait.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "kernels/error.h"
#include "parallel/mpi_communicator.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

Tensor filled(int64_t n, float value) {
  Tensor t = Tensor::empty({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = value;
  return t;
}

TEST_CASE("a default handle is complete and has no events") {
  CommHandle h;
  CHECK_FALSE(h.pending());
  CHECK(h.test());
  CHECK_FALSE(h.enqueued().recorded());
  CHECK_FALSE(h.completed().recorded());
  h.wait_on(Stream());
  h.wait();
}

TEST_CASE("stream wait: the operation has completed when it returns, its events recorded") {
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  CHECK(w.stream().device() == Device::kCpu);
  w.barrier();
  // The last rank joins late, so the others' stream wait has to block until it does.
  if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Tensor t = filled(4, static_cast<float>(r + 1));
  CommHandle h = w.all_reduce_async(t);
  CHECK(h.enqueued().recorded());
  CHECK_FALSE(h.completed().recorded());
  Stream compute;
  h.wait_on(compute);
  CHECK_FALSE(h.pending());
  REQUIRE(h.completed().recorded());
  CHECK(h.completed().seconds_since(h.enqueued()) >= 0);
  if (r == 0) CHECK(h.completed().seconds_since(h.enqueued()) > 0.05);  // waited for the late rank
  for (int64_t i = 0; i < t.numel(); ++i) CHECK(t.f32()[i] == static_cast<float>(n * (n + 1) / 2));
}

TEST_CASE("host wait and test record the completion event too") {
  Communicator& w = world();
  Tensor t = filled(2, 1.f);
  CommHandle a = w.all_reduce_async(t);
  a.wait();
  CHECK(a.completed().recorded());
  CommHandle b = w.barrier_async();
  while (!b.test()) std::this_thread::yield();
  CHECK(b.completed().recorded());
  CHECK(b.completed().seconds_since(b.enqueued()) >= 0);
}

TEST_CASE("a stream wait is under the watchdog") {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto watchdog = std::make_shared<Watchdog>(0.2, [](const HangReport&) {});
  MpiCommunicator group(comm, "late", "test", watchdog);
  Tensor t = filled(8, 1.f);
  if (group.rank() == 0) {
    CommHandle h = group.all_reduce_async(t);
    try {
      h.wait_on(Stream());
      FAIL("the stream wait did not time out");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("rank 0: all_reduce(sum) of f32[8] (32 B) on group 'late'"));
    }
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    group.all_reduce(t);  // completes rank 0's abandoned all_reduce
  }
  world().barrier();
}

}  // namespace
}  // namespace lattice
