// Fuzz target: a Megatron indexed dataset (PREFIX.idx + PREFIX.bin) as the trainer and
// `lattice data inspect` open it, then every token read (the start-up check of the largest id). Input: a u16 little-endian length L, L
// bytes of .bin, the rest is the .idx. Only InputError may come out.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "data/dataset_stats.h"
#include "data/indexed_dataset.h"
#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t bin_bytes = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  lattice::fuzz::write_file("data.bin", rest.substr(0, bin_bytes));
  lattice::fuzz::write_file("data.idx", rest.substr(bin_bytes));
  const std::string prefix = lattice::fuzz::scratch_dir() + "/data";
  std::remove(lattice::dataset_stats_path(prefix).c_str());  // every input is read, never a cached result
  try {
    const lattice::IndexedDataset dataset(prefix);
    lattice::dataset_stats(dataset);
  } catch (const lattice::InputError&) {
  }
  return 0;
}
