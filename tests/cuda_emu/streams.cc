// The emulated runtime's streams and events (see streams.h), and the CUDA calls on them.
#include "tests/cuda_emu/streams.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/cuda_emu/shim/cuda_runtime.h"

struct CUstream_st {
  std::deque<std::shared_ptr<lattice::emu::StreamItem>> queue;
  bool destroyed = false;  // cudaStreamDestroy: freed once its queue is empty, as CUDA does
};

namespace lattice::emu {

struct StreamItem {
  std::unique_ptr<AsyncWork> work;
  uint64_t number = 0;  // in issue order, over all queued streams
  bool started = false;
  bool done = false;
  std::chrono::steady_clock::time_point finished_at;
};

namespace {

using Clock = std::chrono::steady_clock;

// Never destroyed: a tensor freed during exit still queues its release on the compute stream.
std::recursive_mutex& streams_mutex() {  // recursive: a work item's start() may issue more work
  static auto* m = new std::recursive_mutex;
  return *m;
}
std::vector<CUstream_st*>& queued_streams() {
  static auto* streams = new std::vector<CUstream_st*>;
  return *streams;
}

// One hardware queue (streams.h), as CUDA_DEVICE_MAX_CONNECTIONS=1 makes the device.
bool one_queue = [] {
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return connections != nullptr && std::string_view(connections) == "1";
}();
// `issued` numbers the queued streams' items in issue order and `next_to_start` counts those started:
// under one hardware queue they start in that order, so it is the number of the next to start (both
// under streams_mutex).
uint64_t issued = 0, next_to_start = 0;

void push(CUstream_st* s, std::shared_ptr<StreamItem> item) {
  item->number = issued++;
  s->queue.push_back(std::move(item));
}

bool is_queued(cudaStream_t stream) {
  const std::vector<CUstream_st*>& all = queued_streams();
  return std::find(all.begin(), all.end(), stream) != all.end();
}

// A queued stream's wait for an event: finished when the event's point is reached.
class WaitForItem : public AsyncWork {
 public:
  explicit WaitForItem(std::shared_ptr<StreamItem> item) : item_(std::move(item)) {}
  void start() override {}
  bool finished() override { return item_->done; }

 private:
  std::shared_ptr<StreamItem> item_;
};

// Device work (run_on): done when its function has returned (not while it runs, should it move the queues).
thread_local bool in_device_work = false;

class DeviceWork : public AsyncWork {
 public:
  explicit DeviceWork(std::function<void()> fn) : fn_(std::move(fn)) {}
  void start() override {
    in_device_work = true;
    struct Reset {
      ~Reset() { in_device_work = false; }
    } reset;
    fn_();
    returned_ = true;
  }
  bool finished() override { return returned_; }

 private:
  std::function<void()> fn_;
  bool returned_ = false;
};

void finish(CUstream_st* s) {
  StreamItem& head = *s->queue.front();
  head.done = true;
  head.finished_at = Clock::now();
  head.work.reset();
  s->queue.pop_front();
}

// Passes over the streams until none moves: what finishes on one stream may let another start.
void progress_locked() {
  std::vector<CUstream_st*>& all = queued_streams();
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < all.size();) {
      CUstream_st* s = all[i];
      while (!s->queue.empty()) {
        StreamItem& head = *s->queue.front();
        if (!head.started) {
          if (one_queue && head.number != next_to_start) break;  // work issued before it has not started
          head.started = true;
          ++next_to_start;
          moved = true;
          try {
            head.work->start();
          } catch (...) {  // an emulator error in a kernel: reported to the thread that moved the queue
            finish(s);
            throw;
          }
        }
        if (!head.work->finished()) break;
        finish(s);
        moved = true;
      }
      if (s->destroyed && s->queue.empty()) {
        all.erase(all.begin() + static_cast<std::ptrdiff_t>(i));
        delete s;
      } else {
        ++i;
      }
    }
  }
}

bool reached(cudaEvent_t event) {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  progress_locked();
  if (event->after == nullptr) return true;
  if (!event->after->done) return false;
  event->when = event->after->finished_at;
  event->after.reset();
  return true;
}

void host_wait(cudaEvent_t event) {
  while (!reached(event)) std::this_thread::yield();
}

}  // namespace

void progress() {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  progress_locked();
}

bool one_hardware_queue() {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  return one_queue;
}

void set_one_hardware_queue(bool one) {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  progress_locked();
  if (next_to_start != issued) throw std::logic_error("set_one_hardware_queue: work is waiting to start");
  one_queue = one;
}

cudaStream_t compute_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, 0);
    return s;
  }();
  return stream;
}

void run_on(cudaStream_t stream, std::function<void()> fn) {
  if (in_device_work) {
    fn();
    return;
  }
  enqueue(stream != nullptr ? stream : compute_stream(), std::make_unique<DeviceWork>(std::move(fn)));
}

void enqueue(cudaStream_t stream, std::unique_ptr<AsyncWork> work) {
  std::unique_lock<std::recursive_mutex> lock(streams_mutex());
  auto item = std::make_shared<StreamItem>();
  item->work = std::move(work);
  if (is_queued(stream)) {
    push(stream, std::move(item));
    progress_locked();
    return;
  }
  item->started = true;
  item->work->start();
  lock.unlock();
  while (!item->work->finished()) {
    progress();
    std::this_thread::yield();
  }
}

}  // namespace lattice::emu

using lattice::emu::streams_mutex;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  *stream = new CUstream_st;
  lattice::emu::queued_streams().push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  if (!lattice::emu::is_queued(stream)) return cudaErrorInvalidResourceHandle;
  stream->destroyed = true;
  lattice::emu::progress_locked();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st{lattice::emu::Clock::now(), nullptr};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(streams_mutex());
  lattice::emu::progress_locked();
  event->after = lattice::emu::is_queued(stream) && !stream->queue.empty() ? stream->queue.back() : nullptr;
  event->when = lattice::emu::Clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return lattice::emu::reached(event) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  lattice::emu::host_wait(event);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!lattice::emu::reached(start) || !lattice::emu::reached(end)) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  std::unique_lock<std::recursive_mutex> lock(streams_mutex());
  if (lattice::emu::is_queued(stream)) {
    if (event->after != nullptr && !event->after->done) {
      auto wait = std::make_shared<lattice::emu::StreamItem>();
      wait->work = std::make_unique<lattice::emu::WaitForItem>(event->after);
      lattice::emu::push(stream, std::move(wait));
    }
    lattice::emu::progress_locked();
    return cudaSuccess;
  }
  lock.unlock();
  lattice::emu::host_wait(event);  // a synchronous stream's later work runs when issued: wait now
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CUevent_st end{};
  cudaEventRecord(&end, stream);
  lattice::emu::host_wait(&end);
  return cudaSuccess;
}

// As CUDA does, the function runs on a thread of its own, so one that sleeps holds up its stream, not the host.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  class HostFunction : public lattice::emu::AsyncWork {
   public:
    HostFunction(cudaHostFn_t fn, void* data) : fn_(fn), data_(data) {}
    ~HostFunction() override {
      if (thread_.joinable()) thread_.join();
    }
    void start() override {
      thread_ = std::thread([this] {
        fn_(data_);
        done_ = true;
      });
    }
    bool finished() override { return done_; }

   private:
    cudaHostFn_t fn_;
    void* data_;
    std::thread thread_;
    std::atomic<bool> done_{false};
  };
  lattice::emu::enqueue(stream, std::make_unique<HostFunction>(fn, data));
  return cudaSuccess;
}
