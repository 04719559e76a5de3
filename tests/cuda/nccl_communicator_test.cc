// NcclCommunicator on GPUs, under mpirun with one rank per visible GPU (tools/gpu/check.sh: one
// rank on the lent H200; more where more GPUs are visible), and on the CPU emulator's NCCL with 1-3
// ranks (tests/cuda_emu, whose compute stream runs behind the host as a GPU's does). Each
// collective on CUDA tensors gives exactly what the MPI path gives on the same values (integers, so
// any summation order is exact); NCCL reads what the compute stream wrote before the call (a
// poisoned buffer, overwritten only after a stall on the compute stream, must never reach the
// output); CPU tensors go to MPI; split groups work; a stream wait on a collective orders the
// compute stream without a host wait (the watchdog keeps it in flight), and a stalled one is caught
// by the watchdog's wait for in-flight operations; a collective stalled past the watchdog's timeout
// is reported naming the group and the operation, and aborts the communicator; results are the
// same bits run after run.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "kernels/cuda/runtime.h"
#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "parallel/nccl_communicator.h"
#include "parallel/trace.h"
#include "tests/kernels/test_util.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

const DeviceContext& gpu() {
  static const DeviceContext ctx = [] {
    cuda::select_device(world().rank(), world().size());
    return DeviceContext(Device::kCuda);
  }();
  return ctx;
}

// The NCCL communicator over a duplicate of the MPI world (built once: creation is collective).
NcclCommunicator& nccl() {
  static std::unique_ptr<NcclCommunicator> comm = [] {
    gpu();
    return std::make_unique<NcclCommunicator>(world().split(0, world().rank(), "nccl-test", ""));
  }();
  return *comm;
}

// Integer values that depend on the rank and the index: sums of them are exact in f32 and bf16.
Tensor rank_values(int64_t n, DType dtype, int rank) {
  Tensor host = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) host.f32()[i] = static_cast<float>((i * 7 + rank * 3) % 61 - 30);
  if (dtype == DType::kF32) return host;
  Tensor cast = Tensor::empty({n}, dtype);
  ops::cast(host, cast);
  return cast;
}

std::vector<uint8_t> bytes_of(const Tensor& host) {
  const auto* p = static_cast<const uint8_t*>(host.raw());
  return {p, p + host.bytes()};
}

// Sleeps on the compute stream (a host function): the stream's later work waits behind it.
void stall_compute_stream(int ms) {
  static int stall_ms = 0;
  stall_ms = ms;
  LATTICE_CHECK(cudaLaunchHostFunc(cuda::compute_stream(),
                                   [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms)); },
                                   nullptr) == cudaSuccess,
                "cudaLaunchHostFunc");
}

TEST_CASE("all_reduce, reduce_scatter, all_gather, broadcast and all_to_all on CUDA tensors equal the MPI path") {
  const int r = world().rank(), n = world().size();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
      const int64_t total = count * n;
      const Tensor host = rank_values(total, dtype, r);
      // all_reduce, sum and max
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        Tensor device = gpu().to_device(host);
        nccl().all_reduce_async(device, op).wait();
        Tensor want = test::clone(host);
        world().all_reduce(want, op);
        CHECK(bytes_of(gpu().to_host(device)) == bytes_of(want));
      }
      // reduce_scatter
      Tensor out = gpu().empty({count}, dtype);
      nccl().reduce_scatter_async(gpu().to_device(host), out).wait();
      Tensor want_out = Tensor::empty({count}, dtype);
      world().reduce_scatter(host, want_out);
      CHECK(bytes_of(gpu().to_host(out)) == bytes_of(want_out));
      // all_gather
      const Tensor part = rank_values(count, dtype, r);
      Tensor gathered = gpu().empty({total}, dtype);
      nccl().all_gather_async(gpu().to_device(part), gathered).wait();
      Tensor want_gathered = Tensor::empty({total}, dtype);
      world().all_gather(part, want_gathered);
      CHECK(bytes_of(gpu().to_host(gathered)) == bytes_of(want_gathered));
      // broadcast from the last rank
      Tensor b = gpu().to_device(host);
      nccl().broadcast_async(b, n - 1).wait();
      Tensor want_b = test::clone(host);
      world().broadcast(want_b, n - 1);
      CHECK(bytes_of(gpu().to_host(b)) == bytes_of(want_b));
      // all_to_all (a group of sends and receives)
      const Tensor sent = gpu().to_device(host);
      Tensor exchanged = gpu().empty({total}, dtype);
      nccl().all_to_all_async(sent, exchanged).wait();
      Tensor want_exchanged = Tensor::empty({total}, dtype);
      world().all_to_all(host, want_exchanged);
      CHECK(bytes_of(gpu().to_host(exchanged)) == bytes_of(want_exchanged));
      CHECK_THROWS_WITH(nccl().all_to_all_async(sent, sent), Catch::Contains("all_to_all has no in-place form"));
    }
  }
}

TEST_CASE("NCCL reads what the compute stream wrote before the call, not what was there before") {
  const int64_t n = 1 << 22;
  Tensor buffer = gpu().empty({n});
  ops::fill(buffer, -1.0f);  // the poison
  cuda::synchronize();
  // Stall the compute stream (a host function that sleeps), then overwrite the buffer after the
  // stall: a collective not ordered after the compute stream would gather the poison.
  stall_compute_stream(300);
  ops::fill(buffer, 5.0f);
  Tensor out = gpu().empty({n * world().size()});
  nccl().all_gather_async(buffer, out).wait();
  const Tensor host = gpu().to_host(out);
  int64_t poisoned = 0;
  for (int64_t i = 0; i < host.numel(); ++i) poisoned += host.f32()[i] != 5.0f;
  CHECK(poisoned == 0);
}

TEST_CASE("CPU tensors go to MPI, split groups get their own NCCL communicators") {
  Tensor cpu = rank_values(100, DType::kF32, world().rank());
  Tensor want = test::clone(cpu);
  nccl().all_reduce(cpu);
  world().all_reduce(want);
  CHECK(bytes_of(cpu) == bytes_of(want));
  // Every rank alone: an all_reduce is the identity.
  std::unique_ptr<Communicator> alone = nccl().split(world().rank(), 0, "alone", "");
  REQUIRE(alone != nullptr);
  CHECK(alone->size() == 1);
  const Tensor host = rank_values(1000, DType::kF32, world().rank());
  Tensor device = gpu().to_device(host);
  alone->all_reduce_async(device).wait();
  CHECK(bytes_of(gpu().to_host(device)) == bytes_of(host));
}

TEST_CASE("the same inputs give the same bits run after run") {
  const Tensor host = rank_values(1 << 20, DType::kBF16, world().rank());
  Tensor a = gpu().to_device(host), b = gpu().to_device(host);
  nccl().all_reduce_async(a).wait();
  nccl().all_reduce_async(b).wait();
  CHECK(bytes_of(gpu().to_host(a)) == bytes_of(gpu().to_host(b)));
}

TEST_CASE("a stream wait on an NCCL collective orders the compute stream without a host wait") {
  const Tensor host = rank_values(1 << 16, DType::kF32, world().rank());
  Tensor t = gpu().to_device(host), warm = gpu().to_device(host);
  // A first use of an algorithm connects to the peers (NCCL >= 2.22 connects at runtime), which
  // holds the host until they arrive: not what is timed below.
  nccl().all_reduce_async(warm).wait();
  cuda::synchronize();
  Watchdog& watchdog = nccl().watchdog();
  const size_t before = watchdog.in_flight();
  stall_compute_stream(400);  // the collective, ordered after the compute stream, cannot finish before
  const auto start = std::chrono::steady_clock::now();
  nccl().all_reduce_async(t).wait_on(gpu().stream());
  const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(host_s < 0.2);  // the host went on
  CHECK(watchdog.in_flight() == before + 1);
  ops::scale(t, 2.0f);  // on the compute stream: must read the reduced values
  const Tensor got = gpu().to_host(t);
  Tensor want = test::clone(host);
  world().all_reduce(want);
  int64_t wrong = 0;
  for (int64_t i = 0; i < got.numel(); ++i) wrong += got.f32()[i] != 2.0f * want.f32()[i];
  CHECK(wrong == 0);
  watchdog.wait_in_flight();
  CHECK(watchdog.in_flight() == 0);
}

TEST_CASE("a traced group puts its collectives on a lane of their own, timed on the NCCL stream") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/nccl_trace.json";
  NcclCommunicator comm(world().split(0, world().rank(), "traced", ""));
  {
    Tracer tracer(path, world().rank());
    comm.set_tracer(&tracer);
    Tensor t = gpu().to_device(rank_values(1 << 20, DType::kF32, world().rank()));
    stall_compute_stream(50);
    comm.all_reduce_async(t).wait_on(gpu().stream());
    tracer.flush();
    comm.set_tracer(nullptr);
  }
  std::ifstream in(Tracer::trace_path_for_rank(path, world().rank()));
  REQUIRE(in);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int spans = 0, lanes = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("name", "") == "thread_name" && e["args"].value("name", "") == "nccl traced") ++lanes;
    if (e.value("ph", "") == "X" && e.value("cat", "") == "nccl traced") {
      ++spans;
      CHECK_THAT(e.value("name", ""), Catch::Contains("all_reduce(sum) of f32[1048576]"));
      CHECK(e.value("dur", 0.0) > 0.0);
    }
  }
  CHECK(lanes == 1);
  CHECK(spans == 1);
  comm.watchdog().wait_in_flight();
}

// A watchdog whose action returns: the wait then throws the report (the default ends the job). The
// groups share the world's watchdog: shortened here, restored below.
TEST_CASE("a collective stalled past the timeout is reported naming the group and the operation, and aborts") {
  for (const bool stream_wait : {false, true}) {
    INFO((stream_wait ? "stream wait, then the watchdog's wait for operations in flight" : "host wait"));
    std::string report;
    const std::string name = stream_wait ? "stalled-ordered" : "stalled";
    NcclCommunicator comm(world().split(0, world().rank(), name, "injected stall"));
    // Before the stall: to_device's copy waits for the compute stream (on a GPU too).
    Tensor t = gpu().to_device(rank_values(1000, DType::kF32, world().rank()));
    // Connected first (a first use connects to the peers, on the host, under the timeout), so that
    // what times out below is the stall alone.
    comm.all_reduce_async(t).wait();
    comm.watchdog().set_timeout_s(0.2);
    comm.watchdog().set_action([&](const HangReport& r) { report = r.message; });
    stall_compute_stream(1500);
    if (stream_wait) {
      comm.all_reduce_async(t).wait_on(gpu().stream());  // no host wait here
      CHECK_THROWS(comm.watchdog().wait_in_flight());    // the step's read-back would wait here
    } else {
      CHECK_THROWS(comm.all_reduce_async(t).wait());
    }
    CHECK_THAT(report, Catch::Contains("'" + name + "'") && Catch::Contains("all_reduce(sum) of f32[1000]"));
    cuda::synchronize();  // the stall ends
    // The timed-out wait aborted the communicator: later calls say so.
    CHECK_THROWS_WITH(comm.all_reduce_async(t), Catch::Contains("the NCCL communicator was aborted"));
    comm.watchdog().set_timeout_s(20);
    comm.watchdog().set_action({});
  }
}

}  // namespace
}  // namespace lattice
