// The emulated runtime's streams and events (see streams.h), and the CUDA calls on them.
#include "tests/cuda_emu/streams.h"

#include <algorithm>
#include <deque>
#include <mutex>
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
  bool started = false;
  bool done = false;
  std::chrono::steady_clock::time_point finished_at;
};

namespace {

using Clock = std::chrono::steady_clock;

std::recursive_mutex& streams_mutex() {  // recursive: a work item's start() may issue more work
  static std::recursive_mutex m;
  return m;
}
std::vector<CUstream_st*>& queued_streams() {
  static std::vector<CUstream_st*> streams;
  return streams;
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

void progress_locked() {
  std::vector<CUstream_st*>& all = queued_streams();
  for (size_t i = 0; i < all.size();) {
    CUstream_st* s = all[i];
    while (!s->queue.empty()) {
      StreamItem& head = *s->queue.front();
      if (!head.started) {
        head.started = true;
        head.work->start();
      }
      if (!head.work->finished()) break;
      head.done = true;
      head.finished_at = Clock::now();
      head.work.reset();
      s->queue.pop_front();
    }
    if (s->destroyed && s->queue.empty()) {
      all.erase(all.begin() + static_cast<std::ptrdiff_t>(i));
      delete s;
    } else {
      ++i;
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

void enqueue(cudaStream_t stream, std::unique_ptr<AsyncWork> work) {
  std::unique_lock<std::recursive_mutex> lock(streams_mutex());
  auto item = std::make_shared<StreamItem>();
  item->work = std::move(work);
  if (is_queued(stream)) {
    stream->queue.push_back(std::move(item));
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
      stream->queue.push_back(std::make_shared<lattice::emu::StreamItem>());
      stream->queue.back()->work = std::make_unique<lattice::emu::WaitForItem>(event->after);
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

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  class HostFunction : public lattice::emu::AsyncWork {
   public:
    HostFunction(cudaHostFn_t fn, void* data) : fn_(fn), data_(data) {}
    void start() override { fn_(data_); }
    bool finished() override { return true; }

   private:
    cudaHostFn_t fn_;
    void* data_;
  };
  lattice::emu::enqueue(stream, std::make_unique<HostFunction>(fn, data));
  return cudaSuccess;
}
