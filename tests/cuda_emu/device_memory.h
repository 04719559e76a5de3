// Whether a range is emulated device memory (runtime_emu.cc's pool), so that the emulated NCCL
// refuses a host buffer as NCCL on a GPU would.
#pragma once

#include <cstddef>

namespace lattice::emu {

bool is_device_memory(const void* ptr, size_t bytes);

}  // namespace lattice::emu
