// MpiCommunicator on device tensors under mpirun (2 ranks), with the CPU stand-in posing as the
// CUDA backend: every collective and p2p op gives bit for bit what it gives on CPU tensors, the
// device tensors went through host staging (counted copies), inputs are read at the call and
// outputs written only when a wait or test() sees completion. CPU tensors are never copied.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "kernels/device_context.h"
#include "kernels/ops.h"
#include "parallel/mpi_communicator.h"
#include "tests/kernels/backend_harness.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

// Backend entries are plain function pointers, so the counting wrappers use statics.
int g_to_host = 0;
int g_from_host = 0;
Backend g_stand_in;

void counted_to_host(const void* src, void* host_dst, int64_t bytes) {
  ++g_to_host;
  test::cuda_stand_in().copy_to_host(src, host_dst, bytes);
}

void counted_from_host(const void* host_src, void* dst, int64_t bytes) {
  ++g_from_host;
  test::cuda_stand_in().copy_from_host(host_src, dst, bytes);
}

const Backend* counting_stand_in() {
  g_stand_in = test::cuda_stand_in();
  g_stand_in.copy_to_host = &counted_to_host;
  g_stand_in.copy_from_host = &counted_from_host;
  return &g_stand_in;
}

struct Copies {
  int to_host;
  int from_host;
  bool operator==(const Copies&) const = default;
};

// Copies since the last call.
Copies take_copies() {
  Copies c{g_to_host, g_from_host};
  g_to_host = g_from_host = 0;
  return c;
}

// Per-rank values whose sums round differently in different orders, so bitwise equality with the
// CPU path means the same reduction happened.
Tensor host_values(int64_t n, int rank, float salt = 0.f) {
  Tensor t = Tensor::empty({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = 0.1f * static_cast<float>(rank + 1) + 0.37f * i + salt;
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// The stand-in CUDA backend registered for a test case, and its context.
struct Cuda {
  test::ScopedBackend scoped{Device::kCuda, counting_stand_in()};
  DeviceContext ctx{Device::kCuda};

  Tensor upload(const Tensor& host) {
    Tensor t = ctx.to_device(host);
    take_copies();  // count only what the communicator does
    return t;
  }
  Tensor download(const Tensor& t) {
    Tensor host = ctx.to_host(t);
    take_copies();
    return host;
  }
};

TEST_CASE("staged all_reduce matches the CPU result; the copy-back waits for completion") {
  Cuda cuda;
  Communicator& w = world();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    Tensor cpu = host_values(37, w.rank());
    w.all_reduce(cpu, op);
    CHECK(take_copies() == Copies{0, 0});  // CPU tensors take the direct path

    Tensor dev = cuda.upload(host_values(37, w.rank()));
    CommHandle h = w.all_reduce_async(dev, op);
    CHECK(take_copies() == Copies{1, 0});
    // MPI writes the host buffer only: the device tensor keeps its value until completion.
    CHECK(same_bits(cuda.download(dev), host_values(37, w.rank())));
    h.wait();
    CHECK(take_copies() == Copies{0, 1});
    CHECK(dev.device() == Device::kCuda);
    CHECK(same_bits(cuda.download(dev), cpu));
  }
}

// bf16 reductions run MPI's user-defined ops on the staged 16-bit patterns: the same bits as on the CPU.
TEST_CASE("staged bf16 all_reduce and reduce_scatter match the CPU results") {
  Cuda cuda;
  Communicator& w = world();
  const int n = w.size();
  Tensor values = Tensor::empty({8 * n}, DType::kBF16);
  ops::cast(host_values(8 * n, w.rank()), values);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    Tensor cpu = Tensor::empty({8 * n}, DType::kBF16);
    ops::copy(values, cpu);
    w.all_reduce(cpu, op);
    Tensor dev = cuda.upload(values);
    w.all_reduce(dev, op);
    CHECK(take_copies() == Copies{1, 1});
    CHECK(same_bits(cuda.download(dev), cpu));
  }
  Tensor rs_cpu = Tensor::empty({8}, DType::kBF16);
  w.reduce_scatter(values, rs_cpu);
  Tensor rs_out = cuda.ctx.zeros({8}, DType::kBF16);
  w.reduce_scatter(cuda.upload(values), rs_out);
  CHECK(take_copies() == Copies{1, 1});
  CHECK(same_bits(cuda.download(rs_out), rs_cpu));
}

TEST_CASE("staged all_reduce in chunks, completed by test() and by a stream wait") {
  Cuda cuda;
  MpiCommunicator& w = world();
  const int64_t saved = w.max_count();
  w.set_max_count(5);
  Tensor cpu = host_values(23, w.rank());
  w.all_reduce(cpu);

  Tensor a = cuda.upload(host_values(23, w.rank()));
  CommHandle ha = w.all_reduce_async(a);
  while (!ha.test()) std::this_thread::yield();
  CHECK(take_copies() == Copies{1, 1});  // one staging buffer for all chunks
  CHECK(same_bits(cuda.download(a), cpu));

  Tensor b = cuda.upload(host_values(23, w.rank()));
  CommHandle hb = w.all_reduce_async(b);
  hb.wait_on(Stream());
  CHECK(take_copies() == Copies{1, 1});
  CHECK(same_bits(cuda.download(b), cpu));
  w.set_max_count(saved);
}

TEST_CASE("staged reduce_scatter, all_gather and all_to_all match the CPU results") {
  Cuda cuda;
  Communicator& w = world();
  const int n = w.size(), r = w.rank();

  Tensor rs_cpu = Tensor::empty({6});
  w.reduce_scatter(host_values(6 * n, r), rs_cpu);
  Tensor rs_in = cuda.upload(host_values(6 * n, r));
  Tensor rs_out = cuda.ctx.zeros({6});
  CommHandle h = w.reduce_scatter_async(rs_in, rs_out);
  CHECK(take_copies() == Copies{1, 0});
  h.wait();
  CHECK(take_copies() == Copies{0, 1});
  CHECK(same_bits(cuda.download(rs_out), rs_cpu));

  Tensor ag_cpu = Tensor::empty({5 * n});
  w.all_gather(host_values(5, r), ag_cpu);
  Tensor ag_out = cuda.ctx.zeros({5 * n});
  w.all_gather(cuda.upload(host_values(5, r)), ag_out);
  CHECK(take_copies() == Copies{1, 1});
  CHECK(same_bits(cuda.download(ag_out), ag_cpu));

  Tensor a2a_cpu = Tensor::empty({3 * n});
  w.all_to_all(host_values(3 * n, r), a2a_cpu);
  Tensor a2a_out = cuda.ctx.zeros({3 * n});
  w.all_to_all(cuda.upload(host_values(3 * n, r)), a2a_out);
  CHECK(take_copies() == Copies{1, 1});
  CHECK(same_bits(cuda.download(a2a_out), a2a_cpu));

  // Mixed devices: only the device side is staged.
  Tensor mixed_out = cuda.ctx.zeros({5 * n});
  w.all_gather(host_values(5, r), mixed_out);
  CHECK(take_copies() == Copies{0, 1});
  CHECK(same_bits(cuda.download(mixed_out), ag_cpu));
}

TEST_CASE("staged broadcast: the root copies its value in, every rank copies the result back") {
  Cuda cuda;
  Communicator& w = world();
  for (int root = 0; root < w.size(); ++root) {
    Tensor cpu = Tensor::empty({9}, DType::kI32);
    for (int i = 0; i < 9; ++i) cpu.i32()[i] = w.rank() * 100 + i;
    Tensor dev = cuda.upload(cpu);
    w.broadcast(cpu, root);
    w.broadcast(dev, root);
    CHECK(take_copies() == Copies{w.rank() == root ? 1 : 0, 1});
    CHECK(same_bits(cuda.download(dev), cpu));
    CHECK(cpu.i32()[4] == root * 100 + 4);
  }
}

TEST_CASE("staged send and recv around the ring: the value at the send call is what arrives") {
  Cuda cuda;
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  Tensor in = cuda.upload(host_values(11, r, 0.5f));
  Tensor out = cuda.ctx.zeros({11});
  CommHandle recv = w.recv_async(out, (r + n - 1) % n, 7);
  CommHandle send = w.send_async(in, (r + 1) % n, 7);
  CHECK(take_copies() == Copies{1, 0});
  // Overwriting the device input after the call does not change what is sent.
  cuda.ctx.copy_from_host(host_values(11, r, 99.f), in);
  take_copies();
  send.wait();
  recv.wait();
  CHECK(take_copies() == Copies{0, 1});
  CHECK(same_bits(cuda.download(out), host_values(11, (r + n - 1) % n, 0.5f)));

  // The same ring on CPU tensors: no copies.
  Tensor cpu_out = Tensor::zeros({11});
  CommHandle cpu_recv = w.recv_async(cpu_out, (r + n - 1) % n, 8);
  w.send(host_values(11, r, 0.5f), (r + 1) % n, 8);
  cpu_recv.wait();
  CHECK(take_copies() == Copies{0, 0});
  CHECK(same_bits(cpu_out, host_values(11, (r + n - 1) % n, 0.5f)));
}

}  // namespace
}  // namespace lattice
