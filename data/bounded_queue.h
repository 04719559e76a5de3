// BoundedQueue: a blocking multi-producer/multi-consumer FIFO with a capacity, and close() for
// shutdown. The pipeline stages of `lattice data prepare` hand work to each other through it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace lattice {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Blocks while full. Returns false (and drops item) once the queue is closed.
  bool push(T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    if (items_.size() > peak_) peak_ = items_.size();
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. Returns nullopt once the queue is closed and drained.
  std::optional<T> pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Wakes every waiter: push fails from now on, pop drains what is left, then returns nullopt.
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Drops queued items (for cancellation) and closes.
  void cancel() {
    std::lock_guard lock(mu_);
    closed_ = true;
    items_.clear();
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t capacity() const { return capacity_; }
  // Most items ever queued at once; never above capacity().
  size_t peak() const {
    std::lock_guard lock(mu_);
    return peak_;
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  size_t peak_ = 0;
  bool closed_ = false;
};

}  // namespace lattice
