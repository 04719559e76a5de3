// Support for the tests of bad input: files under the test's temporary directory, and the check that
// a call ends in an InputError whose message holds every given part.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace lattice::testing {

// NAME under $TEST_TMPDIR (Bazel's per-test directory), else the system's temporary directory.
inline std::string temp_path(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(tmp ? tmp : std::filesystem::temp_directory_path().string()) / name).string();
}

// Writes `bytes` to temp_path(name) and returns that path.
inline std::string write_temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// f() must throw an InputError whose message contains every one of `parts`.
inline void require_input_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no InputError");
  } catch (const InputError& e) {
    for (const auto& p : parts) CHECK_THAT(e.what(), Catch::Contains(p));
  }
}

}  // namespace lattice::testing
