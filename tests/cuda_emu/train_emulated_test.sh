#!/usr/bin/env bash
# tests/cuda/train_gpu_test.sh, the GPU end-to-end checks, with `device: cuda` on the CPU emulator of
# the CUDA backend (tests/cuda_emu:lattice_emulated): GPU against CPU over 20 steps, two runs
# bit-identical, resume bitwise, model.init_from, the host-staged multi-rank layouts and bf16, on
# the emulated kernels. Not a GPU run: see tests/cuda_emu/emulator.h for what it cannot show.
set -euo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1  # two ranks share the machine's cores with the other tests
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }
WORK=${TEST_TMPDIR:-$(mktemp -d)}
LATTICE=$PWD/tests/cuda_emu/lattice_emulated
$LATTICE data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" --output-prefix "$WORK/tiny" \
  --text-document-separator percent-line >/dev/null
MPIRUN="mpirun --allow-run-as-root" tests/cuda/train_gpu_test.sh "$LATTICE" "$WORK/tiny" "$WORK/runs"
