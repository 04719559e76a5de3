// What code logs through spdlog's default logger, captured as text for a test to search
// ("[...] [warning] ..."): the logger is swapped for the call and restored after it, also on a throw.
#pragma once

#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace lattice::testing {

inline std::string captured_log(const std::function<void()>& body) {
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  try {
    body();
  } catch (...) {
    spdlog::set_default_logger(previous);
    throw;
  }
  spdlog::set_default_logger(previous);
  return log.str();
}

}  // namespace lattice::testing
