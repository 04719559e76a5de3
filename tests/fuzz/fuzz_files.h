// Fuzz-target support: the parsers under test read paths, so each input is written to a file in a
// per-process scratch directory (on tmpfs when there is one) before the parser opens it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lattice::fuzz {

// A directory made at first use and removed when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp != nullptr ? tmp : "/tmp");
    path_ = base + "/lattice-fuzz-XXXXXX";
    if (mkdtemp(path_.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + base);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

// The input cut at NUL bytes: "a\0b\0c" -> {"a", "b", "c"} (how targets with several files or
// values take them from one input).
inline std::vector<std::string_view> split_nul(const uint8_t* data, size_t size) {
  std::vector<std::string_view> parts;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (true) {
    const size_t nul = rest.find('\0');
    parts.push_back(rest.substr(0, nul));
    if (nul == std::string_view::npos) return parts;
    rest.remove_prefix(nul + 1);
  }
}

}  // namespace lattice::fuzz
