#!/usr/bin/env bash
# tests/cuda/nccl_train_test.sh on the CPU emulator (tests/cuda_emu:lattice_emulated, two emulated
# GPUs): parallel.backend nccl — parallel/nccl_communicator.cc over the emulated NCCL, MPI underneath
# (nccl_emu.cc) — against the host-staged MPI path, bit for bit, in one rank and the 2-rank layouts.
# Not a GPU run: it proves the communicator's calls, groups, events and the pipeline's lanes, not
# NCCL itself (see nccl_emu.cc).
set -euo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1 LATTICE_EMULATED_GPUS=2
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }
WORK=${TEST_TMPDIR:-$(mktemp -d)}
LATTICE=$PWD/tests/cuda_emu/lattice_emulated
$LATTICE data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" --output-prefix "$WORK/tiny" \
  --text-document-separator percent-line >/dev/null
MPIRUN="mpirun --allow-run-as-root" tests/cuda/nccl_train_test.sh "$LATTICE" "$WORK/tiny" "$WORK/runs" 2
