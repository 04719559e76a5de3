# Sourced by the emulated training tests: OpenMPI's test environment, one thread per rank (two ranks
# share the machine's cores with the other tests), and the tiny dataset prepared in $WORK/tiny.
# Sets LATTICE (tests/cuda_emu:lattice_emulated), WORK and MPIRUN.
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }
WORK=${TEST_TMPDIR:-$(mktemp -d)}
LATTICE=$PWD/tests/cuda_emu/lattice_emulated
export MPIRUN="mpirun --allow-run-as-root"
$LATTICE data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" --output-prefix "$WORK/tiny" \
  --text-document-separator percent-line >/dev/null
