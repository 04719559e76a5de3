// The emulated runtime's queued streams (streams.h), which the emulated NCCL's operations run on:
// a stream's work runs one item after another, events are not ready until the work before them has
// finished, a stream that waits for an event starts nothing after the wait before it, and a
// destroyed stream still finishes its work; the compute stream runs work as it is issued unless a
// host function or a wait holds it back, and the copy stream is synchronous; under one hardware
// queue, work that cannot start holds back what was issued after it on every stream.
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/cuda_emu/shim/cuda_runtime.h"

namespace lattice::emu {
namespace {

// Work that finishes when the test says so, logging its start.
class Gate : public AsyncWork {
 public:
  Gate(std::string name, const bool* open, std::vector<std::string>* started)
      : name_(std::move(name)), open_(open), started_(started) {}
  void start() override { started_->push_back(name_); }
  bool finished() override { return *open_; }

 private:
  std::string name_;
  const bool* open_;
  std::vector<std::string>* started_;
};

TEST_CASE("a queued stream runs its work in order, and its events wait for it") {
  std::vector<std::string> started;
  bool a_open = false, b_open = false, c_open = false;
  cudaStream_t s = nullptr, t = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t after_a, after_b, on_empty;
  cudaEventCreateWithFlags(&after_a, 0);
  cudaEventCreateWithFlags(&after_b, 0);
  cudaEventCreateWithFlags(&on_empty, 0);
  cudaEventRecord(on_empty, t);
  CHECK(cudaEventQuery(on_empty) == cudaSuccess);  // nothing was queued on t

  enqueue(s, std::make_unique<Gate>("a", &a_open, &started));
  cudaEventRecord(after_a, s);
  enqueue(s, std::make_unique<Gate>("b", &b_open, &started));
  cudaEventRecord(after_b, s);
  // t waits for b, then runs c.
  cudaStreamWaitEvent(t, after_b, 0);
  enqueue(t, std::make_unique<Gate>("c", &c_open, &started));
  CHECK(started == std::vector<std::string>{"a"});
  CHECK(cudaEventQuery(after_a) == cudaErrorNotReady);

  a_open = true;
  CHECK(cudaEventQuery(after_a) == cudaSuccess);
  CHECK(started == std::vector<std::string>{"a", "b"});
  CHECK(cudaEventQuery(after_b) == cudaErrorNotReady);

  // Destroyed with work queued: the work still runs to the end.
  cudaStreamDestroy(s);
  b_open = true;
  cudaEventSynchronize(after_b);
  progress();
  CHECK(started == std::vector<std::string>{"a", "b", "c"});
  c_open = true;
  CHECK(cudaStreamSynchronize(t) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, after_a, after_b) == cudaSuccess);
  CHECK(ms >= 0);
  for (cudaEvent_t e : {after_a, after_b, on_empty}) cudaEventDestroy(e);
  cudaStreamDestroy(t);
}

TEST_CASE("the compute stream runs work when issued unless held back, and then the host runs ahead of it") {
  std::vector<std::string> started;
  bool open = true;
  enqueue(compute_stream(), std::make_unique<Gate>("now", &open, &started));
  CHECK(started == std::vector<std::string>{"now"});
  int ran = 0;
  run_on(compute_stream(), [&] {
    run_on(compute_stream(), [&] { ran += 10; });  // issued inside an item: part of it
    CHECK(ran == 10);
    ++ran;
  });
  CHECK(ran == 11);
  // An emulator error in work run as it is issued reaches the issuer, and the stream goes on.
  CHECK_THROWS_WITH(run_on(compute_stream(), [] { throw std::runtime_error("bad launch"); }), "bad launch");
  run_on(compute_stream(), [&] { ++ran; });
  CHECK(ran == 12);

  // A host function that has not returned holds the stream back, not the host: what follows waits,
  // and so does a queued stream that waits for it.
  static std::atomic<bool> release{false};
  cudaLaunchHostFunc(
      compute_stream(), [](void*) { while (!release) std::this_thread::yield(); }, nullptr);
  run_on(compute_stream(), [&] { ++ran; });
  cudaEvent_t after_host_function, behind_done;
  cudaEventCreateWithFlags(&after_host_function, 0);
  cudaEventCreateWithFlags(&behind_done, 0);
  cudaEventRecord(after_host_function, compute_stream());
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, 0);
  cudaStreamWaitEvent(s, after_host_function, 0);
  enqueue(s, std::make_unique<Gate>("behind", &open, &started));
  cudaEventRecord(behind_done, s);
  CHECK(ran == 12);
  CHECK(cudaEventQuery(after_host_function) == cudaErrorNotReady);
  CHECK(started == std::vector<std::string>{"now"});
  release = true;
  CHECK(cudaStreamSynchronize(compute_stream()) == cudaSuccess);
  CHECK(ran == 13);
  CHECK(cudaEventQuery(behind_done) == cudaSuccess);
  CHECK(started == std::vector<std::string>{"now", "behind"});

  // The compute stream waits for a queued stream's event without the host waiting.
  bool gate_open = false;
  cudaEvent_t gate_done;
  cudaEventCreateWithFlags(&gate_done, 0);
  enqueue(s, std::make_unique<Gate>("gate", &gate_open, &started));
  cudaEventRecord(gate_done, s);
  cudaStreamWaitEvent(compute_stream(), gate_done, 0);
  run_on(compute_stream(), [&] { ++ran; });
  CHECK(ran == 13);
  gate_open = true;
  CHECK(cudaStreamSynchronize(compute_stream()) == cudaSuccess);
  CHECK(ran == 14);

  // The copy stream is synchronous: work runs when issued, and a wait on it is a host wait.
  const auto copy = reinterpret_cast<cudaStream_t>(uintptr_t{2});
  bool last_open = false;
  enqueue(s, std::make_unique<Gate>("last", &last_open, &started));
  cudaEventRecord(gate_done, s);
  run_on(copy, [&] { ++ran; });
  CHECK(ran == 15);
  last_open = true;
  cudaStreamWaitEvent(copy, gate_done, 0);
  CHECK(cudaEventQuery(gate_done) == cudaSuccess);
  for (cudaEvent_t e : {after_host_function, behind_done, gate_done}) cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

TEST_CASE("under one hardware queue, work that cannot start holds back all issued after it, on every stream") {
  const bool from_environment = one_hardware_queue();
  for (const bool one_queue : {false, true}) {
    INFO((one_queue ? "one hardware queue" : "streams on their own"));
    set_one_hardware_queue(one_queue);
    std::vector<std::string> started;
    bool a_open = false, b_open = true;
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, 0);
    enqueue(s, std::make_unique<Gate>("a", &a_open, &started));  // starts, and runs beside what follows
    int ran = 0;
    run_on(compute_stream(), [&] { ++ran; });
    CHECK(ran == 1);
    enqueue(s, std::make_unique<Gate>("b", &b_open, &started));  // cannot start before a finishes
    run_on(compute_stream(), [&] { ++ran; });
    CHECK(ran == (one_queue ? 1 : 2));
    CHECK(started == std::vector<std::string>{"a"});
    a_open = true;
    CHECK(cudaStreamSynchronize(compute_stream()) == cudaSuccess);
    CHECK(ran == 2);
    CHECK(started == std::vector<std::string>{"a", "b"});
    cudaStreamDestroy(s);
  }
  set_one_hardware_queue(from_environment);
}

}  // namespace
}  // namespace lattice::emu
