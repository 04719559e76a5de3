#!/usr/bin/env bash
# The watchdog ends a job in which rank 1 never enters an all_reduce: within seconds, with exit code
# 3 (hung collective), and a message naming the rank, the group and the operation.
set -uo pipefail
source tests/parallel/mpi_env.sh
BIN=tests/parallel/hang_bin
start=$(date +%s)
out=$(timeout 45 mpirun --allow-run-as-root --oversubscribe -np 4 "$BIN" 2 2>&1)
code=$?
took=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $code after ${took} s"
fail=0
if [[ $code -ne 3 ]]; then echo "FAIL: exit code $code, want 3 (hung collective)"; fail=1; fi
if [[ $took -ge 30 ]]; then echo "FAIL: took ${took} s for a 2 s timeout"; fail=1; fi
want="rank 0: all_reduce(sum) of f32[1024] (4 KiB) on group 'tp' (world ranks [0, 1]; pp 0, dp 0) did not complete within parallel.timeout_s = 2 s"
if ! grep -qF -- "$want" <<<"$out"; then echo "FAIL: no line containing: $want"; fail=1; fi
if ! grep -qF -- "[rank 0 0/0/0]" <<<"$out"; then echo "FAIL: the message lacks the [rank 0 0/0/0] prefix"; fail=1; fi
if grep -qF -- "watchdog did not end the job" <<<"$out"; then echo "FAIL: a rank got past the hang"; fail=1; fi
exit $fail
