// Reading and atomically replacing small files beside a dataset.
#include "data/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{} {}: cannot open the file", what, path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void replace_file(const std::string& path, const std::string& contents) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: {}", what, why));
  };
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!f.flush()) fail(fmt::format("cannot write '{}'", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(fmt::format("cannot rename '{}' to '{}'", tmp, path));
}

}  // namespace lattice
