#!/usr/bin/env bash
# tests/cuda/nccl_train_test.sh on the CPU emulator (tests/cuda_emu:lattice_emulated, two emulated
# GPUs): parallel.backend nccl — parallel/nccl_communicator.cc over the emulated NCCL, MPI underneath
# (nccl_emu.cc) — against the host-staged MPI path, bit for bit, in one rank and the 2-rank layouts.
# Not a GPU run: it proves the communicator's calls, groups, events and the pipeline's lanes, not
# NCCL itself (see nccl_emu.cc).
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
# The watchdog at 300 s, not the GPU's 60: an emulated step takes tenths of a second of CPU per
# rank, and a test running beside this one can leave it almost no CPU for minutes.
# slurm_cluster_test's un-sandboxed 2-rank CPU runs do: beside them this test's ranks got ~2% of a
# core for 50 s, one pipeline=2 interleaved step took 119 s (before the emulator's faster fiber
# switches), and in CI that run's first send waited past the 60 s watchdog.
export WATCHDOG_S=300
LATTICE_EMULATED_GPUS=2 tests/cuda/nccl_train_test.sh "$LATTICE" "$WORK/tiny" "$WORK/runs" 2
