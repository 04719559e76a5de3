// CRC-32 (zlib's, the checksum gzip/PNG use) of byte runs and of whole files: the per-file
// and per-tensor checksums of sharded checkpoints, computed while writing and verified before a load
// trusts the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lattice {

// Incremental: update() with the runs in order; value() is the CRC of everything so far.
class Crc32 {
 public:
  void update(const void* data, size_t bytes);
  // Extends the CRC by a run of `bytes` bytes whose own CRC is `next` (zlib's crc32_combine): a
  // file's CRC from its tensors' CRCs, without a second pass over the data.
  void append(uint32_t next, uint64_t bytes);
  uint32_t value() const { return crc_; }

 private:
  uint32_t crc_ = 0;
};

struct FileChecksum {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// Reads `path` once: its first `max_bytes` bytes (all of it by default; a file's header). Throws
// InputError naming the file when it cannot be opened or read.
FileChecksum file_checksum(const std::string& path, uint64_t max_bytes = UINT64_MAX);

}  // namespace lattice
