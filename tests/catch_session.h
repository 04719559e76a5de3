// Runs a Catch2 (v2) session on the command line, where a test filter that matches no test case
// fails the run (Catch2's exit 2) instead of passing with nothing run: a filter that has gone
// stale, or that Catch2 reads differently than meant, must not hide a suite. Included by the
// translation unit that defines CATCH_CONFIG_RUNNER.
#pragma once

#include <catch2/catch.hpp>

namespace lattice::testing {

inline int run_catch_session(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  Catch::ConfigData& data = session.configData();
  data.warnings = static_cast<Catch::WarnAbout::What>(data.warnings | Catch::WarnAbout::NoTests);
  return session.run();
}

}  // namespace lattice::testing
