// The emulated runtime's queued streams (streams.h), which the emulated NCCL's operations run on:
// a stream's work runs one item after another, events are not ready until the work before them has
// finished, a stream that waits for an event starts nothing after the wait before it, and a
// destroyed stream still finishes its work.
#include <string>
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

TEST_CASE("the synchronous streams run work when it is issued, and a wait on them is a host wait") {
  std::vector<std::string> started;
  bool open = true;
  const auto compute = reinterpret_cast<cudaStream_t>(uintptr_t{1});
  enqueue(compute, std::make_unique<Gate>("now", &open, &started));
  CHECK(started == std::vector<std::string>{"now"});
  // A host function on a queued stream runs in its turn.
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, 0);
  bool gate_open = false;
  static int calls = 0;
  enqueue(s, std::make_unique<Gate>("first", &gate_open, &started));
  cudaLaunchHostFunc(s, [](void*) { ++calls; }, nullptr);
  CHECK(calls == 0);
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, 0);
  cudaEventRecord(done, s);
  gate_open = true;
  cudaStreamWaitEvent(compute, done, 0);  // the host waits: the compute stream's next work runs now
  CHECK(calls == 1);
  cudaEventDestroy(done);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace lattice::emu
