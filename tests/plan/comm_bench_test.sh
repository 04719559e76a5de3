#!/usr/bin/env bash
# `lattice bench --comm` under mpirun -np 2 prints the timings and a positive α and β for all-reduce
# and p2p; without mpirun it exits 2 saying how to launch it.
set -uo pipefail
source tests/parallel/mpi_env.sh
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE bench --comm >"$WORK/comm.txt" 2>&1 ||
  fail "bench --comm exited $?: $(cat "$WORK/comm.txt")"
cat "$WORK/comm.txt"
for op in all_reduce p2p; do
  line=$(grep -E "^  $op: +α" "$WORK/comm.txt") || { fail "no fitted line for $op"; continue; }
  beta=$(sed -E 's/.*β ([0-9.]+) GB\/s.*/\1/' <<<"$line")
  python3 -c "import sys; sys.exit(0 if float('$beta') > 0 else 1)" || fail "$op β is $beta"
done
grep -q '"intra_node_bandwidth"' "$WORK/comm.txt" || fail "no --gpu FILE line"

out=$($LATTICE bench --comm 2>&1)
code=$?
[[ $code -eq 2 ]] && grep -qF "mpirun -np 2 lattice bench --comm" <<<"$out" || fail "one process: exit $code: $out"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "bench --comm checks passed"
