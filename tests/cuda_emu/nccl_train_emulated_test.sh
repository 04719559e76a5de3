#!/usr/bin/env bash
# tests/cuda/nccl_train_test.sh on the CPU emulator (tests/cuda_emu:lattice_emulated, two emulated
# GPUs): parallel.backend nccl — parallel/nccl_communicator.cc over the emulated NCCL, MPI underneath
# (nccl_emu.cc) — against the host-staged MPI path, bit for bit, in one rank and the 2-rank layouts.
# Not a GPU run: it proves the communicator's calls, groups, events and the pipeline's lanes, not
# NCCL itself (see nccl_emu.cc).
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
LATTICE_EMULATED_GPUS=2 tests/cuda/nccl_train_test.sh "$LATTICE" "$WORK/tiny" "$WORK/runs" 2
