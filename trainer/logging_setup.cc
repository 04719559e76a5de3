// Console logging: one stderr logger, a time stamp, the level, and in a parallel job "[rank r tp/pp/dp]".
#include "trainer/logging_setup.h"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace lattice {

void setup_logging() {
  // Logs and errors go to stderr: stdout is for a command's output (validate's report, --json).
  // color_mode::automatic colours only when stderr is a terminal — never in a file, nor under mpirun,
  // which hands each rank a pipe for stderr (and a pseudo-terminal for stdout).
  if (spdlog::get("lattice") == nullptr)
    spdlog::set_default_logger(spdlog::stderr_color_mt("lattice", spdlog::color_mode::automatic));
  spdlog::set_pattern("[%H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::info);
}

void setup_logging(int rank, int tp_rank, int pp_rank, int dp_rank) {
  spdlog::set_pattern(
      fmt::format("[%H:%M:%S] [rank {} {}/{}/{}] [%^%l%$] %v", rank, tp_rank, pp_rank, dp_rank));
  spdlog::set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
}

}  // namespace lattice
