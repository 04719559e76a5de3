// Fuzz target: a sharded checkpoint's metadata.json, read as read_checkpoint_metadata() reads it
// (JSON parse, then metadata_from_json with its coverage check; the reader's own file I/O pulls in
// the whole model and is left out). Input: the file's bytes. Only InputError may come out.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "kernels/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;  // read_checkpoint_metadata turns this into an InputError
  }
  try {
    lattice::metadata_from_json(doc, "iter_0000001/metadata.json");
  } catch (const lattice::InputError&) {
  }
  return 0;
}
