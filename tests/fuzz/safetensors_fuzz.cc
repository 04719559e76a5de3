// Fuzz target: a safetensors file (model.init_from, checkpoint shards) opened and every tensor
// read. Input: the file's bytes. Only InputError may come out.
#include <cstdint>
#include <string_view>

#include "checkpoint/safetensors.h"
#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      lattice::fuzz::write_file("model.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    lattice::read_safetensors(path);
  } catch (const lattice::InputError&) {
  }
  return 0;
}
