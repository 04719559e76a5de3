// The median of repeated timings, which the benchmarks and the run's throughput report.
#pragma once

#include <algorithm>
#include <vector>

namespace lattice {

// The upper median (the middle value, or the higher of the two middle ones): a value that was
// measured, and never the one stalled repetition among three or more. 0 for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace lattice
