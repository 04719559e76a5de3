#!/usr/bin/env bash
# The watchdog ends a job whose collective hangs: within seconds, with exit code 3 (hung collective),
# a message naming the rank, the group and the operation, and the census of the ranks it waits for:
# the one that never joined named with its host, the others waiting in it too, a peer waiting in
# something else named with what.
set -uo pipefail
source tests/parallel/mpi_env.sh
BIN=tests/parallel/hang_bin
fail=0

# run NP CASE: runs hang_bin with a 2 s timeout; sets $out.
run() {
  local start code took
  start=$(date +%s)
  out=$(timeout 45 mpirun --allow-run-as-root --oversubscribe -np "$1" "$BIN" 2 "$2" 2>&1)
  code=$?
  took=$(($(date +%s) - start))
  echo "$out"
  echo "== case $2 on $1 ranks: exit code $code after ${took} s"
  if [[ $code -ne 3 ]]; then echo "FAIL: exit code $code, want 3 (hung collective)"; fail=1; fi
  if [[ $took -ge 30 ]]; then echo "FAIL: took ${took} s for a 2 s timeout"; fail=1; fi
  if grep -qF -- "the watchdog did not end the job" <<<"$out"; then echo "FAIL: a rank got past the hang"; fail=1; fi
}

# want TEXT: rank 0's [critical] line contains TEXT.
want() {
  if ! grep -F -- "[critical]" <<<"$out" | grep -F -- "[rank 0 0/0/0]" | grep -qF -- "$1"; then
    echo "FAIL: rank 0's [critical] line lacks: $1"
    fail=1
  fi
}
# shun TEXT: rank 0's [critical] line does not contain TEXT.
shun() {
  if grep -F -- "[critical]" <<<"$out" | grep -F -- "[rank 0 0/0/0]" | grep -qF -- "$1"; then
    echo "FAIL: rank 0's [critical] line says: $1"
    fail=1
  fi
}

run 4 tp
want "rank 0: all_reduce(sum) of f32[1024] (4 KiB) on group 'tp' (world ranks [0, 1]; pp 0, dp 0) did not complete within parallel.timeout_s = 2 s"
want "Asked the 1 rank it waits for"
want "NO ANSWER from rank 1 on host $(hostname)"
shun "Waiting in it too"

run 4 world
want "rank 0: all_reduce(sum) of f32[1024] (4 KiB) on group 'world' (world ranks [0, 1, 2, 3])"
want "Asked the 3 ranks it waits for"
want "NO ANSWER from rank 3 on host"
want "Waiting in it too: ranks 1-2."

# Both ranks time out together; whichever asks first ends the job with its message.
run 2 cycle
cycle_line() {  # the message of rank $1, waiting for rank $2, which waits for it
  echo "rank $1: recv of f32[1024] (4 KiB) from group rank $2 (world rank $2), tag 0 on group 'tp' (world ranks [0, 1]; pp 0, dp 0) did not complete within parallel.timeout_s = 2 s"
  echo "Asked the 1 rank it waits for"
  echo "Rank $2 (host $(hostname)) waits in recv of f32[1024] (4 KiB) from group rank $1 (world rank $1), tag 0 on group 'tp'"
}
found=0
for r in 0 1; do
  line=$(grep -F -- "[critical] rank $r:" <<<"$out" | head -1)
  [[ -n $line ]] || continue
  found=1
  while IFS= read -r part; do
    grep -qF -- "$part" <<<"$line" || { echo "FAIL: rank $r's [critical] line lacks: $part"; fail=1; }
  done < <(cycle_line "$r" $((1 - r)))
  if grep -qF -- "NO ANSWER" <<<"$line"; then echo "FAIL: rank $r's peer did not answer, though it waits too"; fail=1; fi
done
[[ $found -eq 1 ]] || { echo "FAIL: no [critical] line from rank 0 or 1"; fail=1; }
exit $fail
