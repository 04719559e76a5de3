#!/usr/bin/env bash
# Runs the multi-rank pipeline executor tests under mpirun with the rank count given as $1.
set -uo pipefail
source tests/parallel/mpi_env.sh
exec timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" tests/parallel/pipeline_test_bin
