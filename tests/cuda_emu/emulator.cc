// The CUDA emulator's scheduler (see emulator.h): blocks in order, a block's threads as fibers
// released together at each barrier. A fiber starts on its own stack through ucontext and switches
// with GCC's __builtin_setjmp/__builtin_longjmp afterwards (a stack pointer, a frame pointer and a
// label): swapcontext saves the signal mask with a system call at every switch, and glibc's
// _longjmp walks the thread's cleanup handlers at every jump, which made barrier-heavy kernels
// spend most of their time switching. Fibers outlive the block they run: one that finishes its
// thread parks, and runs the same thread index of the next block (of any launch on this host
// thread), so getcontext/setcontext (a system call each) run once per fiber, not once per thread of
// every block. Under AddressSanitizer (tests/cuda_emu's sanitized targets) every switch is announced
// through its fiber API, so that it checks each fiber's frames against that fiber's stack.
#include "tests/cuda_emu/emulator.h"

#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace lattice::emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;  // per thread: kernels keep small arrays (attention: a head's row)
constexpr int kWarp = 32;
constexpr unsigned kMaxBlockThreads = 1024;
constexpr size_t kMaxDynamicShared = 227 * 1024;  // Hopper's opt-in maximum per block

enum class State { kRunnable, kAtBlockBarrier, kAtWarpBarrier, kDone };

// __builtin_setjmp's buffer: frame pointer, resume label, stack pointer (and two spare words).
using JumpBuf = void* [5];

// Separate and never inlined: __builtin_longjmp may not be in the function of its __builtin_setjmp.
// Not [[noreturn]] and not instrumented: AddressSanitizer unpoisons the whole current stack before a
// call that never returns, which would drop the redzones of the frames a switch leaves suspended.
__attribute__((noinline, no_sanitize_address)) void jump(JumpBuf& to) { __builtin_longjmp(to, 1); }

struct Thread {
  uint3 idx;
  int linear;
  State state;
  int warp_collectives;  // shuffles and ballots so far in this block: its parity picks the exchange slots
};

// The fiber that runs linear thread index i of every block on one host thread.
struct Fiber {
  char* stack = nullptr;
  JumpBuf resume;        // where it waits: at a barrier, or parked between threads
  bool created = false;  // false: start it afresh (never run, or its last block failed mid-way)
  void* asan_fake_stack = nullptr;  // AddressSanitizer's, kept while the fiber is switched out
};

// AddressSanitizer's bookkeeping of which stack runs (no-ops in other builds). leaving_for(save,
// bottom, size) goes right before a switch to the stack [bottom, bottom + size); arrived(saved,
// from) right after landing, and learns the stack it came from.
struct StackSpan {
  const void* bottom = nullptr;
  size_t size = 0;
};
thread_local StackSpan scheduler_stack;  // the launching thread's, learnt as a fiber lands
thread_local void* scheduler_fake_stack = nullptr;

void leaving_for([[maybe_unused]] void** save, [[maybe_unused]] const void* bottom, [[maybe_unused]] size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(save, bottom, size);
#endif
}
void arrived([[maybe_unused]] void* saved, [[maybe_unused]] StackSpan* from) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(saved, from != nullptr ? &from->bottom : nullptr,
                                  from != nullptr ? &from->size : nullptr);
#endif
}

// The launch being run (the emulator runs one at a time, on the calling thread).
struct Run {
  const std::function<void()>* body = nullptr;
  dim3 grid, block;
  uint3 block_idx{0, 0, 0};
  uint64_t block_serial = 0;  // which block of the process this is (for block_shared)
  std::vector<unsigned char> dynamic_shared;
  bool fibers = false;
  bool reached_barrier = false;
  std::vector<Thread> threads;
  Thread* current = nullptr;
  JumpBuf scheduler;
  // Two sets of slots, used by alternate warp collectives: a lane writing set p again has passed the
  // barrier of the collective in between, where every lane had read set p, so one barrier each.
  uint64_t exchange[2][kMaxBlockThreads];
  std::exception_ptr error;  // thrown on a fiber's stack, rethrown by the scheduler
};

Run* run = nullptr;
uint64_t blocks_started = 0;
std::mutex launch_mutex;  // one launch at a time (kernels may be launched from several host threads)

// Per host thread: a fiber's stack frames and saved registers belong to the thread that made it
// (its TLS, its exception state), and launches come from several threads, one at a time.
std::vector<Fiber>& fibers() {
  thread_local std::vector<Fiber> f;  // stacks never freed: reused by every later launch
  return f;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("CUDA emulator: " + what); }

std::string describe(const dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

void validate(const LaunchConfig& c) {
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (threads == 0 || threads > kMaxBlockThreads || c.block.z > 64) {
    fail("invalid block " + describe(c.block) + " (1 to 1024 threads, z at most 64)");
  }
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 ||
      c.grid.z > 65535) {
    fail("invalid grid " + describe(c.grid) + " (x 1 to 2^31-1, y and z 1 to 65535)");
  }
  if (c.dynamic_shared_bytes > kMaxDynamicShared) {
    fail("dynamic shared memory of " + std::to_string(c.dynamic_shared_bytes) + " bytes exceeds 227 KiB");
  }
}

// Switches from fiber f back to the scheduler; returns when the scheduler resumes f.
void to_scheduler(Fiber& f) {
  if (__builtin_setjmp(f.resume) == 0) {
    leaving_for(&f.asan_fake_stack, scheduler_stack.bottom, scheduler_stack.size);
    jump(run->scheduler);
  }
  // Back on this fiber: found again through run->current, as f is not promised to survive the jump.
  arrived(fibers()[run->current->linear].asan_fake_stack, &scheduler_stack);
}

// Runs the thread the scheduler resumes it for, then parks until the next. A fiber's stack has no
// frame to unwind into, so an exception stops here and the scheduler, on the launching thread's
// stack, rethrows it.
[[noreturn]] void fiber_main() {
  arrived(nullptr, &scheduler_stack);  // a fresh fiber: no fake stack saved
  for (;;) {
    try {
      (*run->body)();
    } catch (...) {
      run->error = std::current_exception();
    }
    Thread* self = run->current;
    self->state = State::kDone;
    to_scheduler(fibers()[self->linear]);
  }
}

// Switches from the current fiber back to the scheduler until it is released.
void wait(State at) {
  if (!run->fibers) fail("a block reached a barrier that the launch's first block did not reach");
  run->reached_barrier = true;
  Thread* self = run->current;
  self->state = at;
  to_scheduler(fibers()[self->linear]);
}

// Once every thread has run until it waits or ends: releases each warp whose live lanes all wait at
// a shuffle or ballot (a warp is linear indices [32 w, 32 w + 32)); when there is none, every thread
// waiting at __syncthreads. A warp split between the two, or short of exited lanes, is an error.
void release_or_fail(std::vector<Thread>& threads) {
  const int n = static_cast<int>(threads.size());
  bool released = false;
  for (int w0 = 0; w0 < n; w0 += kWarp) {
    const int w1 = std::min(n, w0 + kWarp);
    int at_warp = 0, live = 0;
    for (int i = w0; i < w1; ++i) {
      if (threads[i].state == State::kDone) continue;
      ++live;
      if (threads[i].state == State::kAtWarpBarrier) ++at_warp;
    }
    if (at_warp == 0) continue;
    if (live != w1 - w0) {
      fail("a shuffle or ballot over all lanes in warp " + std::to_string(w0 / kWarp) + " of block " +
           describe(dim3(run->block_idx.x, run->block_idx.y, run->block_idx.z)) + " after some of its lanes exited");
    }
    if (at_warp != live) {
      fail("warp " + std::to_string(w0 / kWarp) + " diverged: some lanes wait at a shuffle, others at __syncthreads");
    }
    for (int i = w0; i < w1; ++i) threads[i].state = State::kRunnable;
    released = true;
  }
  if (released) return;
  for (Thread& t : threads) {
    if (t.state == State::kAtBlockBarrier) t.state = State::kRunnable;
  }
}

// Switches to thread t's fiber until it waits or ends.
void resume(Thread& t) {
  Fiber& f = fibers()[t.linear];
  run->current = &t;
  if (__builtin_setjmp(run->scheduler) != 0) {
    arrived(scheduler_fake_stack, nullptr);
    return;
  }
  leaving_for(&scheduler_fake_stack, f.stack, kStackBytes);
  if (f.created) jump(f.resume);
  f.created = true;
#if defined(__SANITIZE_ADDRESS__)
  // Frames a failed block abandoned on this stack left their redzones poisoned.
  __asan_unpoison_memory_region(f.stack, kStackBytes);
#endif
  ucontext_t start;
  getcontext(&start);
  start.uc_stack.ss_sp = f.stack;
  start.uc_stack.ss_size = kStackBytes;
  start.uc_link = nullptr;  // fiber_main never returns: it jumps back to the scheduler
  makecontext(&start, reinterpret_cast<void (*)()>(&fiber_main), 0);
  setcontext(&start);
}

void schedule_block() {
  std::vector<Thread>& threads = run->threads;
  const int n = static_cast<int>(threads.size());
  for (Thread& t : threads) {
    t.state = State::kRunnable;
    t.warp_collectives = 0;
  }
  // Odd blocks run their threads in reverse order, so that a missing barrier shows whichever of its
  // reader and its writer has the lower thread index.
  const uint3 b = run->block_idx;
  const bool reverse = (b.x + b.y + b.z) % 2 == 1;
  for (;;) {
    for (int k = 0; k < n; ++k) {
      Thread& t = threads[reverse ? n - 1 - k : k];
      if (t.state != State::kRunnable) continue;
      resume(t);
      if (run->error) std::rethrow_exception(run->error);
    }
    bool all_done = true;
    for (const Thread& t : threads) all_done = all_done && t.state == State::kDone;
    if (all_done) return;
    release_or_fail(threads);
  }
}

void run_block_with_fibers() {
  std::vector<Fiber>& pool = fibers();
  const size_t n = run->threads.size();
  while (pool.size() < n) {
    pool.emplace_back();
    pool.back().stack = static_cast<char*>(std::malloc(kStackBytes));
  }
  try {
    schedule_block();
  } catch (...) {
    // The block's other fibers stopped mid-thread (at a barrier): none may be resumed there.
    for (size_t i = 0; i < n; ++i) pool[i].created = false;
    throw;
  }
}

void run_block_direct() {
  for (Thread& t : run->threads) {
    run->current = &t;
    (*run->body)();
  }
}

}  // namespace

void run_grid(const LaunchConfig& config, const std::function<void()>& thread_body) {
  validate(config);
  std::lock_guard<std::mutex> lock(launch_mutex);
  Run state;
  state.body = &thread_body;
  state.grid = config.grid;
  state.block = config.block;
  state.fibers = true;
  const unsigned bx = config.block.x, by = config.block.y, bz = config.block.z;
  state.threads.resize(static_cast<size_t>(bx) * by * bz);
  for (unsigned z = 0; z < bz; ++z)
    for (unsigned y = 0; y < by; ++y)
      for (unsigned x = 0; x < bx; ++x) {
        const int linear = static_cast<int>(x + bx * (y + by * z));
        state.threads[linear].idx = uint3{x, y, z};
        state.threads[linear].linear = linear;
      }
  run = &state;
  struct Unset {
    ~Unset() { run = nullptr; }  // also when a launch throws
  } unset;
  for (unsigned z = 0; z < config.grid.z; ++z)
    for (unsigned y = 0; y < config.grid.y; ++y)
      for (unsigned x = 0; x < config.grid.x; ++x) {
        state.block_idx = uint3{x, y, z};
        state.block_serial = ++blocks_started;
        // Uninitialized shared memory reads as NaN (all bits set), as a poisoned buffer would.
        state.dynamic_shared.assign(config.dynamic_shared_bytes, 0xff);
        if (state.fibers) {
          run_block_with_fibers();
          // A kernel whose first block reached no barrier runs its other blocks as plain calls.
          state.fibers = state.reached_barrier;
        } else {
          run_block_direct();
        }
      }
}

const uint3& thread_idx() { return run->current->idx; }
const uint3& block_idx() { return run->block_idx; }
const dim3& block_dim() { return run->block; }
const dim3& grid_dim() { return run->grid; }
void* dynamic_shared() { return run->dynamic_shared.data(); }

void block_shared(void* array, size_t bytes) {
  static std::unordered_map<void*, uint64_t> poisoned_in;  // array -> the block that last poisoned it
  uint64_t& last = poisoned_in[array];
  if (last == run->block_serial) return;
  std::memset(array, 0xff, bytes);
  last = run->block_serial;
}
int lane_id() { return run->current->linear % kWarp; }

void syncthreads() { wait(State::kAtBlockBarrier); }

// The exchange slots of the calling lane's next warp collective.
uint64_t* exchange_slots() { return run->exchange[run->current->warp_collectives++ % 2]; }

void warp_exchange(const void* bits, void* out, size_t bytes, int src_lane) {
  const int self = run->current->linear;
  uint64_t* slots = exchange_slots();
  uint64_t slot = 0;
  std::memcpy(&slot, bits, bytes);
  slots[self] = slot;
  wait(State::kAtWarpBarrier);  // every lane has written
  const int src = self - self % kWarp + src_lane;
  if (src_lane < 0 || src_lane >= kWarp || src >= static_cast<int>(run->threads.size())) {
    fail("shuffle from lane " + std::to_string(src_lane) + ", outside the warp");
  }
  std::memcpy(out, &slots[src], bytes);
}

unsigned warp_ballot(bool predicate) {
  const int self = run->current->linear;
  uint64_t* slots = exchange_slots();
  slots[self] = predicate ? 1 : 0;
  wait(State::kAtWarpBarrier);
  const int w0 = self - self % kWarp;
  const int w1 = std::min(static_cast<int>(run->threads.size()), w0 + kWarp);
  unsigned mask = 0;
  for (int i = w0; i < w1; ++i) mask |= (slots[i] != 0 ? 1u : 0u) << (i - w0);
  return mask;
}

}  // namespace lattice::emu
