// `lattice --version`: the version number (defined here and nowhere else), the git commit the binary
// was built from, and how it was built (CUDA or CPU only, compiler, the BLAS library in use).
#pragma once

#include <string>

namespace lattice {

inline constexpr char kVersion[] = "0.1.0";

// The source tree's commit from Bazel's workspace status (tools/workspace_status.sh): 12 hex digits,
// with "-dirty" when tracked files had uncommitted changes, "unknown" outside a git checkout.
// Defined in the generated build_info.cc (//trainer:build_info).
const char* git_commit();

// The lines `lattice --version` prints (no final newline), e.g. "lattice 0.1.0\ncommit   0123456789ab\n...".
std::string version_text();

}  // namespace lattice
