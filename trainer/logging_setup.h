// spdlog set-up: one console logger with a time stamp; later the rank and grid coordinates.
#pragma once

namespace lattice {

void setup_logging();

}  // namespace lattice
