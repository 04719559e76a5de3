#!/usr/bin/env bash
# Runs the multi-rank data-parallel tests (gradient buckets, distributed optimizer) under mpirun
# with the rank count given as $1.
set -uo pipefail
source tests/parallel/mpi_env.sh
exec timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" tests/parallel/dp_test_bin
