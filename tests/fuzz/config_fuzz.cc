// Fuzz target: a run config file and its --set overrides, as `lattice validate` reads them
// (load_config, then the layout check and its printout). Input: the config file's bytes, then
// one --set argument per NUL-separated part. Only InputError may come out.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"
#include "trainer/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = lattice::fuzz::split_nul(data, size);
  const std::string path = lattice::fuzz::write_file("config.json", parts[0]);
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  try {
    const lattice::Config config = lattice::load_config(path, overrides);
    lattice::config_to_json(config).dump();
    const lattice::ParallelLayout layout = lattice::validate_layout(config, lattice::default_world_size(config));
    lattice::format_layout(layout, config);
  } catch (const lattice::InputError&) {
  }
  return 0;
}
