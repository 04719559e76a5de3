#!/usr/bin/env bash
# Runs the multi-rank Catch2 binary $1 under mpirun with $2 ranks (further arguments: its own).
set -uo pipefail
source tests/parallel/mpi_env.sh
exec timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$2" "$1" "${@:3}"
