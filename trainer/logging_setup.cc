// Console logging format. With one process there is no rank prefix yet; the parallel work adds
// "[rank r tp/pp/dp]" here.
#include "trainer/logging_setup.h"

#include <spdlog/spdlog.h>

namespace lattice {

void setup_logging() {
  spdlog::set_pattern("[%H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::info);
}

}  // namespace lattice
