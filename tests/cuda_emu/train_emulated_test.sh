#!/usr/bin/env bash
# tests/cuda/train_gpu_test.sh, the GPU end-to-end checks, with `device: cuda` on the CPU emulator of
# the CUDA backend (tests/cuda_emu:lattice_emulated): GPU against CPU over 20 steps, two runs
# bit-identical, resume bitwise, model.init_from, the host-staged multi-rank layouts and bf16, on
# the emulated kernels. Not a GPU run: see tests/cuda_emu/emulator.h for what it cannot show.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
tests/cuda/train_gpu_test.sh "$LATTICE" "$WORK/tiny" "$WORK/runs"
