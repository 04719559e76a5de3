#!/usr/bin/env bash
# Runs the multi-rank sharded checkpoint tests under mpirun: 4 ranks (2 tp x 2 dp).
set -uo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1
exec timeout 120 mpirun --allow-run-as-root --oversubscribe -np 4 tests/checkpoint/sharded_checkpoint_mpi_test_bin
