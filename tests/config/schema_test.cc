// The config schema against the README's config reference: every section's table lists the
// schema's keys in order, and the --set paragraph names every string-valued key.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/readme_testing.h"
#include "trainer/config_schema.h"

using namespace lattice;

namespace {

std::string config_reference() { return testing::readme_config_reference(testing::readme_text()); }

}  // namespace

TEST_CASE("the README's config reference lists the schema's keys, section by section, in order") {
  // "### `model`" opens a section; "| `arch` | ..." is a key row of its table.
  const std::regex heading("^### `(\\w+)`"), row("^\\| `(\\w+)` \\|");
  std::vector<std::string> sections;
  std::map<std::string, std::vector<std::string>> keys;
  std::istringstream lines(config_reference());
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, heading)) {
      sections.push_back(m[1]);
      keys[m[1]];
    } else if (!sections.empty() && std::regex_search(line, m, row)) {
      keys[sections.back()].push_back(m[1]);
    }
  }
  CHECK(sections == config_sections());
  for (const std::string& section : config_sections()) {
    INFO("section " << section);
    CHECK(keys[section] == config_keys(section));
  }
}

TEST_CASE("the README's --set paragraph names every string-valued key") {
  const std::string ref = config_reference();
  const auto begin = ref.find("For string-valued keys (");
  REQUIRE(begin != std::string::npos);
  const std::string list = ref.substr(begin, ref.find(')', begin) - begin);
  std::set<std::string> named;
  const std::regex name("`([\\w.]+)`");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), name); it != std::sregex_iterator(); ++it)
    named.insert((*it)[1]);
  std::set<std::string> text;
  for (const ConfigField& f : config_schema())
    if (f.text) text.insert(f.name());
  CHECK(named == text);
}

TEST_CASE("every schema field has a one-line doc") {
  for (const ConfigField& f : config_schema()) {
    INFO(f.name());
    CHECK(!f.doc.empty());
    CHECK(f.doc.find('\n') == std::string::npos);
  }
}
