// Helpers shared by the data tests: a per-test scratch directory and the Python dataset writer.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace lattice::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    const char* base = std::getenv("TEST_TMPDIR");
    path_ = std::filesystem::path(base ? base : "/tmp") / ("lattice_data_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// tests/data/write_indexed_dataset.py from the runfiles (cwd of a Bazel test is the runfiles
// root of the `lattice` workspace) or from the source tree when run by hand.
inline std::string writer_script() {
  const char* candidates[] = {"tests/data/write_indexed_dataset.py",
                              "lattice/tests/data/write_indexed_dataset.py"};
  for (const char* c : candidates) {
    if (std::filesystem::exists(c)) return c;
  }
  if (const char* src = std::getenv("TEST_SRCDIR")) {
    std::string p = std::string(src) + "/lattice/tests/data/write_indexed_dataset.py";
    if (std::filesystem::exists(p)) return p;
  }
  FAIL("write_indexed_dataset.py not found from cwd " << std::filesystem::current_path());
  return "";
}

inline void run_writer(const std::string& args) {
  std::string cmd = "python3 " + writer_script() + " " + args;
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
}

}  // namespace lattice::testing
