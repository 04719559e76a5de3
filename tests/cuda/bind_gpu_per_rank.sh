#!/usr/bin/env bash
# Runs "$@" with CUDA_VISIBLE_DEVICES set to this rank's local rank, so that each rank sees one GPU of
# its own as its device 0, as Slurm's --gpus-per-task=1 binds them: `mpirun -np 2 bind_gpu_per_rank.sh
# lattice train ...`.
export CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-0}}
exec "$@"
