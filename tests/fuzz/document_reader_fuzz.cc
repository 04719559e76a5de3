// Fuzz target: the corpus reader of `lattice data prepare` (text with each separator, and JSONL)
// cutting a file into documents and pieces. Input: one byte choosing format/separator/piece size,
// the rest is the file. Only InputError may come out.
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/document_reader.h"
#include "kernels/error.h"
#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const char* format = (mode & 1) ? "jsonl" : "text";
  const char* separator = (mode & 6) == 0 ? "file" : (mode & 6) == 2 ? "blank-line" : "percent-line";
  const size_t split_bytes = (mode & 8) ? 16 : 0;
  const std::string path =
      lattice::fuzz::write_file("corpus.txt", std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    lattice::DocumentReader reader({path}, {format}, separator, split_bytes, nullptr);
    std::vector<lattice::DocumentPiece> pieces;
    while (reader.next(pieces, 64)) pieces.clear();
  } catch (const lattice::InputError&) {
  }
  return 0;
}
