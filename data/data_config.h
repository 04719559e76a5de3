// DataConfig: the `data` config section (which dataset or blend of datasets, how it is split and
// shuffled).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lattice {

// One data.blend entry: [weight, prefix].
struct BlendEntry {
  double weight = 1;   // > 0; the weights are normalized to sum 1
  std::string prefix;  // PREFIX.bin + PREFIX.idx
};

struct DataConfig {
  std::string path;                 // dataset prefix: PATH.bin + PATH.idx (Megatron indexed dataset)
  std::vector<BlendEntry> blend;    // alternative to path: datasets mixed by weight (exactly one is set)
  std::string split = "949,50,1";   // train,valid,test weights over documents (of each dataset)
  bool shuffle = true;
  uint64_t seed = 1234;
};

}  // namespace lattice
