// The emulated NCCL's own contract (nccl_emu.cc), under mpirun with 2 ranks, on the NCCL API
// directly: NCCL's in-place forms of reduce-scatter and all-gather (which are not MPI's), a
// broadcast from a separate send buffer, and the refusals a GPU's NCCL would make (a host buffer,
// a peer outside the communicator) named by ncclGetLastError; groups of sends and receives, which
// progress together (all_to_all's), and a group with a refused call, which issues nothing.
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cuda/runtime.h"
#include "tests/cuda_emu/shim/nccl.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

// A communicator of the whole world, made as NcclCommunicator makes one.
ncclComm_t world_comm() {
  static ncclComm_t comm = [] {
    ncclUniqueId id{};
    if (world().rank() == 0) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
    id = world().host().broadcast(id, 0, "the NCCL unique id");
    ncclComm_t c = nullptr;
    REQUIRE(ncclCommInitRankConfig(&c, world().size(), id, world().rank(), nullptr) == ncclSuccess);
    return c;
  }();
  return comm;
}

// n floats of device memory holding `values`.
float* device_floats(const std::vector<float>& values) {
  auto* p = static_cast<float*>(cuda::allocate(values.size() * sizeof(float)));
  std::memcpy(p, values.data(), values.size() * sizeof(float));
  return p;
}

void finish(cudaStream_t stream) { REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess); }

TEST_CASE("NCCL's in-place reduce-scatter and all-gather, and a broadcast from a send buffer") {
  const int r = world().rank(), n = world().size();
  const size_t block = 1000;
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<float> in(block * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 97) + static_cast<float>(r);
  // Reduce-scatter in place: recvbuff is this rank's block of sendbuff.
  float* buf = device_floats(in);
  REQUIRE(ncclReduceScatter(buf, buf + r * block, block, ncclFloat32, ncclSum, world_comm(), s) == ncclSuccess);
  finish(s);
  int64_t wrong = 0;
  for (size_t i = 0; i < block; ++i) {
    const size_t at = r * block + i;
    float want = 0;
    for (int k = 0; k < n; ++k) want += static_cast<float>(at % 97) + static_cast<float>(k);
    wrong += buf[at] != want;
  }
  CHECK(wrong == 0);
  // All-gather in place: each rank's block already in place in recvbuff.
  std::vector<float> mine(block * n, -1.0f);
  for (size_t i = 0; i < block; ++i) mine[r * block + i] = static_cast<float>(r * 10000 + i);
  float* gathered = device_floats(mine);
  REQUIRE(ncclAllGather(gathered + r * block, gathered, block, ncclFloat32, world_comm(), s) == ncclSuccess);
  finish(s);
  wrong = 0;
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < block; ++i) wrong += gathered[k * block + i] != static_cast<float>(k * 10000 + i);
  CHECK(wrong == 0);
  // Broadcast from the last rank's separate send buffer into everyone's recvbuff.
  float* send = device_floats(std::vector<float>(block, static_cast<float>(r + 1)));
  float* recv = device_floats(std::vector<float>(block, 0.0f));
  REQUIRE(ncclBroadcast(send, recv, block, ncclFloat32, n - 1, world_comm(), s) == ncclSuccess);
  finish(s);
  CHECK(recv[0] == static_cast<float>(n));
  CHECK(recv[block - 1] == static_cast<float>(n));
  for (float* p : {buf, gathered, send, recv}) cuda::release(p);
  cudaStreamDestroy(s);
}

TEST_CASE("the emulated NCCL refuses a host buffer and a peer outside the communicator, naming them") {
  std::vector<float> host(16, 1.0f);
  float* device = device_floats(host);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CHECK(ncclAllReduce(host.data(), host.data(), host.size(), ncclFloat32, ncclSum, world_comm(), s) ==
        ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(world_comm()), Catch::Contains("ncclAllReduce: sendbuff") &&
                                                 Catch::Contains("is not device memory"));
  // One element past the allocation is not device memory either.
  CHECK(ncclAllReduce(device, device, host.size() + 1, ncclFloat32, ncclSum, world_comm(), s) == ncclInvalidArgument);
  CHECK(ncclSend(device, host.size(), ncclFloat32, world().size(), world_comm(), s) == ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(world_comm()), Catch::Contains("ncclSend: peer") && Catch::Contains("outside"));
  CHECK(ncclAllReduce(device, device, host.size(), ncclFloat32, ncclProd, world_comm(), s) == ncclInvalidArgument);
  finish(s);
  cuda::release(device);
  cudaStreamDestroy(s);
}

// Each rank sends `values` to the next rank and receives from the previous one in one group; the
// received values.
std::vector<float> exchange_in_group(const std::vector<float>& values, cudaStream_t s) {
  const int r = world().rank(), n = world().size();
  float* send = device_floats(values);
  float* recv = device_floats(std::vector<float>(values.size(), 0.0f));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(send, values.size(), ncclFloat32, (r + 1) % n, world_comm(), s) == ncclSuccess);
  REQUIRE(ncclRecv(recv, values.size(), ncclFloat32, (r + n - 1) % n, world_comm(), s) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  finish(s);
  std::vector<float> got(recv, recv + values.size());
  cuda::release(send);
  cuda::release(recv);
  return got;
}

TEST_CASE("a group's sends and receives progress together; a group with a refused call issues nothing") {
  const int r = world().rank(), n = world().size();
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  // 4 MiB each way, past MPI's eager limit: one after the other on the stream, each rank's send
  // would wait for a receive queued behind it.
  const size_t count = size_t{1} << 20;
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(r * 1000003 + i % 4093);
  const std::vector<float> got = exchange_in_group(mine, s);
  const int from = (r + n - 1) % n;
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += got[i] != static_cast<float>(from * 1000003 + i % 4093);
  CHECK(wrong == 0);
  // A valid send, then a host buffer: the group fails at its end and its send is never issued (the
  // next exchange would otherwise receive it).
  std::vector<float> host(16, 1.0f);
  float* stray = device_floats(std::vector<float>(16, -7.0f));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  CHECK(ncclSend(stray, 16, ncclFloat32, (r + 1) % n, world_comm(), s) == ncclSuccess);
  CHECK(ncclRecv(host.data(), 16, ncclFloat32, from, world_comm(), s) == ncclInvalidArgument);
  CHECK(ncclGroupEnd() == ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(world_comm()), Catch::Contains("ncclRecv: recvbuff") &&
                                                 Catch::Contains("is not device memory"));
  CHECK(exchange_in_group(std::vector<float>(16, static_cast<float>(r)), s) ==
        std::vector<float>(16, static_cast<float>(from)));
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // no group is open
  cuda::release(stray);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace lattice
