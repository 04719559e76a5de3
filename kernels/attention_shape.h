// The dimensions of one causal self-attention call, as every backend's attention kernels take them.
// q is [batch, seq, q_heads, head_dim]; k and v are [batch, seq, kv_heads, head_dim].
#pragma once

#include <cstdint>

namespace lattice {

struct AttentionShape {
  int64_t batch, seq, q_heads, kv_heads, head_dim;
};

}  // namespace lattice
