#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test under //tests/...
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel test //tests/... "$@"
