// Test support: temp dirs and running tests/checkpoint/make_hf_files.py (the reference `safetensors`
// library) from a Bazel test. A missing python3/safetensors/numpy is a test FAILURE, never a skip.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

namespace lattice::testing {

inline std::string test_tmpdir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

// The script through the runfiles tree (the test's cwd is the runfiles root of workspace `lattice`).
inline std::string script_path() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::string candidate = srcdir != nullptr ? std::string(srcdir) + "/lattice/tests/checkpoint/make_hf_files.py" : "";
  if (!candidate.empty() && std::ifstream(candidate).good()) return candidate;
  return "tests/checkpoint/make_hf_files.py";
}

inline std::string python() {
  const char* p = std::getenv("LATTICE_PYTHON");
  return p != nullptr && *p != '\0' ? p : "python3";
}

struct PyResult {
  int rc;
  std::string output;
};

// Runs `python3 make_hf_files.py <args>`; stdout and stderr come back together.
inline PyResult run_script(const std::string& args) {
  static int counter = 0;
  const std::string log = test_tmpdir() + "/py_" + std::to_string(++counter) + ".log";
  const std::string cmd = python() + " '" + script_path() + "' " + args + " > '" + log + "' 2>&1";
  int status = std::system(cmd.c_str());
  std::stringstream ss;
  ss << std::ifstream(log).rdbuf();
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return {rc, ss.str()};
}

// Fails the test (with the fix) when python3 cannot import safetensors and numpy.
inline void require_python_safetensors() {
  PyResult r = run_script("probe");
  INFO("python3 could not import the reference safetensors library. Install it with the README's test "
       "command: pip install safetensors numpy (or point LATTICE_PYTHON at a python3 that has them). Output:\n"
       << r.output);
  REQUIRE(r.rc == 0);
}

// Runs the script and requires success, showing its output on failure.
inline void run_script_ok(const std::string& args) {
  require_python_safetensors();
  PyResult r = run_script(args);
  INFO("make_hf_files.py " << args << " failed:\n" << r.output);
  REQUIRE(r.rc == 0);
}

}  // namespace lattice::testing
