// The flags of `lattice data prepare`, mapped onto data::PrepareOptions.
#pragma once

#include <CLI/CLI.hpp>

#include "data/prepare.h"

namespace lattice {

void add_prepare_options(CLI::App* command, PrepareOptions& options);

}  // namespace lattice
