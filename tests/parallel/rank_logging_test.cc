// setup_logging with grid coordinates: the "[rank r tp/pp/dp]" prefix, info on rank 0 only.
#include <catch2/catch.hpp>

#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "trainer/logging_setup.h"

namespace lattice {
namespace {

std::string log_as(int rank, int tp, int pp, int dp) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  auto saved = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  setup_logging(rank, tp, pp, dp);
  spdlog::info("step info");
  spdlog::warn("a warning");
  spdlog::set_default_logger(saved);
  setup_logging();
  return out.str();
}

TEST_CASE("rank 0 logs info with its coordinates") {
  std::string out = log_as(0, 0, 0, 0);
  CHECK_THAT(out, Catch::Contains("[rank 0 0/0/0] [info] step info"));
  CHECK_THAT(out, Catch::Contains("[rank 0 0/0/0] [warning] a warning"));
}

TEST_CASE("other ranks log warnings and above only") {
  std::string out = log_as(5, 1, 1, 0);
  CHECK_THAT(out, !Catch::Contains("step info"));
  CHECK_THAT(out, Catch::Contains("[rank 5 1/1/0] [warning] a warning"));
}

}  // namespace
}  // namespace lattice
