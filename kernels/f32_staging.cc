// F32Staging: the scratch pool and the widen / round-back calls around an f32 kernel.
#include "kernels/f32_staging.h"

#include <algorithm>
#include <memory>

#include "kernels/error.h"

namespace lattice {

namespace {

struct Buffer {
  std::shared_ptr<Storage> storage;
  int64_t floats = 0;
};

// One device's scratch on one thread, made by one allocator.
struct Pool {
  std::shared_ptr<Storage> (*allocate)(size_t bytes) = nullptr;
  std::array<Buffer, F32Staging::kMaxStaged> buffers;
};

Pool& pool_for(const Backend& backend) {
  thread_local std::array<Pool, 2> pools;  // indexed by Device
  Pool& pool = pools[static_cast<size_t>(backend.device)];
  // A table swapped in for the device (tests' stand-ins) allocates elsewhere: start its pool afresh.
  if (pool.allocate != backend.allocate) pool = Pool{backend.allocate, {}};
  return pool;
}

}  // namespace

float* F32Staging::stage(const Tensor& t, bool read, bool write) {
  uint16_t* bf16 = t.bf16();
  auto it = std::find_if(staged_.begin(), staged_.begin() + count_,
                         [&](const Staged& s) { return s.bf16 == bf16 && s.numel == t.numel(); });
  if (it == staged_.begin() + count_) {
    LATTICE_CHECK(count_ < kMaxStaged, "f32 staging: more than {} bf16 operands in one op", kMaxStaged);
    *it = Staged{bf16, t.numel(), scratch(t.numel()), false, false};
    ++count_;
  }
  if (read && !it->widened) {
    backend_.bf16_to_f32(bf16, it->f32, t.numel());
    it->widened = true;
  }
  it->written = it->written || write;
  return it->f32;
}

// The free buffer that holds `numel` floats with the least to spare, else the largest free one grown
// to `numel`. Capacities only grow, to sizes that ops ask for, so a repeating step stops allocating.
float* F32Staging::scratch(int64_t numel) {
  Pool& pool = pool_for(backend_);
  int best = -1;
  for (int i = 0; i < kMaxStaged; ++i) {
    if (taken_ & (1u << i)) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const int64_t have = pool.buffers[i].floats, current = pool.buffers[best].floats;
    const bool better = have >= numel ? current < numel || have < current : current < numel && have > current;
    if (better) best = i;
  }
  Buffer& buffer = pool.buffers[best];
  if (buffer.storage == nullptr || buffer.floats < numel) {
    buffer.storage.reset();  // release first, so the peak is the new size and not old + new
    buffer.floats = std::max<int64_t>(numel, 1);
    buffer.storage = backend_.allocate(static_cast<size_t>(buffer.floats) * sizeof(float));
  }
  taken_ |= 1u << best;
  return static_cast<float*>(buffer.storage->data());
}

void F32Staging::finish() {
  for (int i = 0; i < count_; ++i) {
    const Staged& s = staged_[i];
    if (s.written) backend_.f32_to_bf16(s.f32, s.bf16, s.numel);
  }
  count_ = 0;
  taken_ = 0;
}

}  // namespace lattice
