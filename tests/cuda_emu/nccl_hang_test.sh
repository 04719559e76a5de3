#!/usr/bin/env bash
# The watchdog ends a job whose NCCL all_reduce rank 1 never enters (tests/cuda_emu/nccl_hang_bin.cc,
# on the emulated NCCL): within seconds, with exit code 3 and the MPI path's message naming the
# rank, the group and the operation, and the census naming rank 1 as the one that never joined.
set -uo pipefail
source tests/parallel/mpi_env.sh
start=$(date +%s)
out=$(timeout 45 mpirun --allow-run-as-root --oversubscribe -np 2 tests/cuda_emu/nccl_hang_bin 2 2>&1)
code=$?
took=$(($(date +%s) - start))
echo "$out"
echo "exit code $code after ${took} s"
fail=0
[[ $code -eq 3 ]] || { echo "FAIL: exit code $code, want 3 (hung collective)"; fail=1; }
[[ $took -lt 30 ]] || { echo "FAIL: took ${took} s for a 2 s timeout"; fail=1; }
want="rank 0: all_reduce(sum) of f32[1024] (4 KiB) on group 'nccl-hang'"
grep -qF -- "$want" <<<"$out" || { echo "FAIL: no line containing: $want"; fail=1; }
want="did not complete within parallel.timeout_s = 2 s"
grep -qF -- "$want" <<<"$out" || { echo "FAIL: no line containing: $want"; fail=1; }
want="Asked the 1 rank it waits for"
grep -qF -- "$want" <<<"$out" || { echo "FAIL: no line containing: $want"; fail=1; }
want="NO ANSWER from rank 1 on host"
grep -qF -- "$want" <<<"$out" || { echo "FAIL: no line containing: $want"; fail=1; }
if grep -qF -- "the watchdog did not end the job" <<<"$out"; then echo "FAIL: a rank got past the hang"; fail=1; fi
exit $fail
