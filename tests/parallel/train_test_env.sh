# Sourced by the tests that drive `lattice train` through the CLI, with or without mpirun: the
# per-test OpenMPI environment, the binary, a work directory, fail() and the tiny fortunes dataset.
source tests/parallel/mpi_env.sh
fail() { echo "FAIL: $*"; exit 1; }
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }

# Tokenizes the fortunes into $WORK/tiny (byte tokenizer), unless an earlier call did.
prepare_tiny_dataset() {
  [[ -f $WORK/tiny.idx ]] || $LATTICE data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" \
    --output-prefix "$WORK/tiny" --text-document-separator percent-line >/dev/null 2>&1
}
