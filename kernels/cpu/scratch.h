// Host scratch memory reused across kernel calls: each slot grows to the largest request it has
// seen and is then reused, so steady-state training steps allocate nothing (DESIGN: workspace is
// allocated once, not inside the step). Slots are per calling thread; a kernel takes its scratch
// before entering its OpenMP region and hands each worker a disjoint part.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace lattice::cpu {

enum class ScratchSlot { kAttentionForward, kAttentionBackward, kNormPartials, kCount };

inline float* scratch(ScratchSlot slot, size_t count, bool zero = false) {
  thread_local std::vector<float> buffers[static_cast<size_t>(ScratchSlot::kCount)];
  std::vector<float>& buffer = buffers[static_cast<size_t>(slot)];
  if (buffer.size() < count) buffer.resize(count);
  if (zero) std::fill(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(count), 0.0f);
  return buffer.data();
}

}  // namespace lattice::cpu
