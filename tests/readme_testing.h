// Tests that hold the README to the code: its text (a data dependency on //:README.md, found in
// the runfiles) and the config reference between its BEGIN/END CONFIG REFERENCE markers.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace lattice::testing {

inline std::string readme_text() {
  std::string path;
  for (const char* p : {"README.md", "lattice/README.md"})
    if (std::filesystem::exists(p)) path = p;
  if (path.empty())
    if (const char* src = std::getenv("TEST_SRCDIR")) path = std::string(src) + "/lattice/README.md";
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The text between the README's BEGIN and END CONFIG REFERENCE markers.
inline std::string readme_config_reference(const std::string& text) {
  const auto begin = text.find("BEGIN CONFIG REFERENCE"), end = text.find("END CONFIG REFERENCE");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  return text.substr(begin, end - begin);
}

}  // namespace lattice::testing
