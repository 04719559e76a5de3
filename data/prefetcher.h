// Prefetcher: a background thread that produces items 0, 1, 2, ... of a sequence ahead of the
// consumer into a bounded queue, so the consumer (a training step) does not wait on I/O.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <pthread.h>

namespace lattice {

// produce(i, item) fills item i. next() hands items out in order; an exception thrown by
// produce(i) is rethrown by the next() that would have returned item i (the thread stops there).
// The destructor stops the thread and joins it, also while produce() is running or the queue is
// full.
template <typename T>
class Prefetcher {
 public:
  using Produce = std::function<void(int64_t index, T& item)>;

  // depth >= 1: items produced ahead of the consumer at most.
  Prefetcher(int64_t first_index, int64_t depth, Produce produce)
      : produce_(std::move(produce)), depth_(depth < 1 ? 1 : depth), next_index_(first_index) {
    thread_ = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next item (blocks until it is ready).
  T next() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    T item = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return item;
  }

 private:
  void run() {
    pthread_setname_np(pthread_self(), "lt-prefetch");  // how nsys, gdb and top -H show it
    for (;;) {
      int64_t index;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || static_cast<int64_t>(queue_.size()) < depth_; });
        if (stop_) return;
        index = next_index_++;
      }
      T item{};
      try {
        produce_(index, item);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = std::current_exception();
        cv_.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(item));
      cv_.notify_all();
    }
  }

  Produce produce_;
  const int64_t depth_;
  int64_t next_index_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lattice
