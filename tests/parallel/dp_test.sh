#!/usr/bin/env bash
# Runs the multi-rank data-parallel tests (gradient buckets, distributed optimizer) under mpirun
# with the rank count given as $1. $2 = in_place: only the [sharded] tests, on shapes that divide by
# 4, so that the distributed optimizer reduce-scatters and all-gathers in place.
set -uo pipefail
source tests/parallel/mpi_env.sh
if [[ ${2:-} == in_place ]]; then
  exec timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" -x LATTICE_TEST_DIVISIBLE_SHAPES=1 \
    tests/parallel/dp_test_bin "[sharded]"
fi
exec timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" tests/parallel/dp_test_bin
