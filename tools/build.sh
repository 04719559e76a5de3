#!/usr/bin/env bash
# Builds the lattice binary (bazel-bin/trainer/lattice) after installing what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build //trainer:lattice
