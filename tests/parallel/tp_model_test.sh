#!/usr/bin/env bash
# Runs the tensor/sequence-parallel model tests under mpirun with the rank count (= tp) given as $1.
set -uo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1
exec timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" tests/parallel/tp_model_test_bin
