// per_thread<T>(owner): state that one object keeps per calling thread (regex match data, BPE
// caches), so that its const methods can run on several threads at once without locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace lattice {

// A process-unique id for an owner object (never reused, unlike its address).
inline uint64_t new_per_thread_owner_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// The calling thread's T for `owner`, made by make() on first use. States of owners that no
// longer exist are dropped when a thread has seen many owners, so the reference is valid only
// until the calling thread asks for the state of another owner of the same type T.
template <class T, class Make>
T& per_thread(uint64_t owner, Make&& make) {
  thread_local std::unordered_map<uint64_t, std::unique_ptr<T>> states;
  thread_local uint64_t last_owner = 0;
  thread_local T* last = nullptr;
  if (owner == last_owner && last != nullptr) return *last;
  auto it = states.find(owner);
  if (it == states.end()) {
    if (states.size() >= 16) states.clear();
    it = states.emplace(owner, make()).first;
  }
  last_owner = owner;
  last = it->second.get();
  return *last;
}

}  // namespace lattice
