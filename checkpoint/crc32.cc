// Crc32 over zlib's crc32_z (size_t lengths, so runs past 4 GiB need no splitting).
#include "checkpoint/crc32.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

void Crc32::update(const void* data, size_t bytes) {
  crc_ = static_cast<uint32_t>(crc32_z(crc_, static_cast<const Bytef*>(data), bytes));
}

void Crc32::append(uint32_t next, uint64_t bytes) {
  crc_ = static_cast<uint32_t>(crc32_combine(crc_, next, static_cast<z_off_t>(bytes)));
}

FileChecksum file_checksum(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<char> buffer(size_t{8} << 20);
  FileChecksum sum;
  Crc32 crc;
  while (sum.bytes < max_bytes) {
    const ssize_t n = ::read(fd, buffer.data(), static_cast<size_t>(std::min<uint64_t>(buffer.size(), max_bytes - sum.bytes)));
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw InputError(fmt::format("reading '{}' failed: {}", path, why));
    }
    if (n == 0) break;
    crc.update(buffer.data(), static_cast<size_t>(n));
    sum.bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  sum.crc32 = crc.value();
  return sum;
}

}  // namespace lattice
