// DataConfig: the `data` config section (which dataset, how it is split and shuffled).
#pragma once

#include <cstdint>
#include <string>

namespace lattice {

struct DataConfig {
  std::string path;                 // dataset prefix: PATH.bin + PATH.idx (Megatron indexed dataset)
  std::string split = "949,50,1";   // train,valid,test weights over documents
  bool shuffle = true;
  uint64_t seed = 1234;
};

}  // namespace lattice
