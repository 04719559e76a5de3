// Small whole files that data/ reads and writes beside a dataset (tokenizer files and records, the
// dataset stats cache): read into memory, and replaced atomically so a reader never sees half a file.
#pragma once

#include <string>

namespace lattice {

// The file's bytes; InputError "WHAT PATH: cannot open the file" when it cannot be opened.
std::string read_whole_file(const std::string& path, const std::string& what);

// Writes PATH.tmp.PID and renames it over `path`. No fsync (the dataset's own .bin/.idx are fsynced
// by IndexedDatasetWriter; checkpoint/'s write_file_atomically also fsyncs, but data/ does not depend
// on checkpoint/). Error naming the file and the reason on failure, with the temporary removed.
void replace_file(const std::string& path, const std::string& contents);

}  // namespace lattice
