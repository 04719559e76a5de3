// Console logging format: a time stamp, the level, and in a parallel job "[rank r tp/pp/dp]".
#include "trainer/logging_setup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lattice {

void setup_logging() {
  spdlog::set_pattern("[%H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::info);
}

void setup_logging(int rank, int tp_rank, int pp_rank, int dp_rank) {
  spdlog::set_pattern(
      fmt::format("[%H:%M:%S] [rank {} {}/{}/{}] [%^%l%$] %v", rank, tp_rank, pp_rank, dp_rank));
  spdlog::set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
}

}  // namespace lattice
