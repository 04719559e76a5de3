// HostChannel: typed host control values over one process group (exact sums, stop and commit
// votes, timings, reports), kept apart from the device-data communicator: never through tensors.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lattice {

// A value that travels as its bytes. Not bool: std::vector<bool> has no data() (votes are uint8_t).
template <class T>
concept HostValue = std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> && !std::same_as<T, bool>;

// Every call is a collective over the group: every member calls it, in the same order. Calls block
// the host until the values have arrived, under the group's watchdog (a rank that never joins ends
// the job with a message naming the group, the rank and `what`). Every reduction is computed on
// every rank from the values gathered in group-rank order, so every rank gets the same bits.
class HostChannel {
 public:
  virtual ~HostChannel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // `what` names the value in hang reports ("stop vote", "checkpoint commit vote").
  template <HostValue T>
  std::vector<T> all_gather(const T& value, std::string_view what) {
    std::vector<T> all(static_cast<size_t>(size()));
    all_gather_bytes(&value, sizeof(T), all.data(), what);
    return all;
  }
  // The root's `value` on every rank.
  template <HostValue T>
  T broadcast(T value, int root, std::string_view what) {
    broadcast_bytes(&value, sizeof(T), root, what);
    return value;
  }
  template <HostValue T>
  T max(const T& value, std::string_view what) {
    const std::vector<T> all = all_gather(value, what);
    return *std::max_element(all.begin(), all.end());
  }
  template <HostValue T>
  T min(const T& value, std::string_view what) {
    const std::vector<T> all = all_gather(value, what);
    return *std::min_element(all.begin(), all.end());
  }
  // Whether any rank voted true.
  bool any(bool vote, std::string_view what) { return max<uint8_t>(vote ? 1 : 0, what) != 0; }

  // Every rank's `text` on `root`, in group-rank order; the other ranks get an empty vector.
  std::vector<std::string> gather_strings(const std::string& text, int root, std::string_view what);

  // Returns once every member has called it.
  void barrier(std::string_view what) { all_gather<uint8_t>(0, what); }

 protected:
  // `out` has size() × bytes bytes: block r is rank r's `in`.
  virtual void all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view what) = 0;
  // The root's `bytes` bytes at `data` replace every other rank's.
  virtual void broadcast_bytes(void* data, size_t bytes, int root, std::string_view what) = 0;
  // On `root`, `out` receives every rank's `in` in rank order (counts[r] bytes from rank r; counts
  // and out are used on the root only).
  virtual void gather_bytes(const void* in, size_t bytes, const std::vector<size_t>& counts, void* out, int root,
                            std::string_view what) = 0;
};

}  // namespace lattice
