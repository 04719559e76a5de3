#!/usr/bin/env bash
# A training run in which one rank stops: the tiny GPT-2 on DP2, parallel.timeout_s 10 s (loaded CI
# machines stall ranks for seconds); once
# training is under way, rank 1 is stopped (SIGSTOP, as a rank stuck outside communication would be).
# Rank 0's next gradient reduction times out: the job must end with exit code 3 and a message whose
# census names rank 1 as the rank that does not answer, not leave the user to guess which rank hung.
set -uo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset
log=$WORK/hang.log
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE train --config configs/test-tiny-gpt2.json \
  --set data.path="$WORK/tiny" --set parallel.data=2 --set training.train_iters=100000 \
  --set logging.log_interval=1 --set parallel.timeout_s=10 >"$log" 2>&1 &
job=$!
# Rank 1's process: the lattice whose environment says OMPI_COMM_WORLD_RANK=1.
rank1=""
for _ in $(seq 1200); do
  if grep -qE "step +3/" "$log"; then
    for pid in $(pgrep -f "$LATTICE train"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then rank1=$pid; fi
    done
    break
  fi
  sleep 0.1
done
[[ -n $rank1 ]] || { kill "$job"; cat "$log"; fail "no rank 1 process found after step 3"; }
kill -STOP "$rank1"
wait "$job"
code=$?
kill -CONT "$rank1" 2>/dev/null
grep -F "[critical]" "$log"
[[ $code -eq 3 ]] || { tail -20 "$log"; fail "exit code $code, want 3 (hung collective)"; }
line=$(grep -F "[critical] rank 0:" "$log" | head -1)
[[ -n $line ]] || fail "no [critical] line from rank 0"
for want in "did not complete within parallel.timeout_s = 10 s" "Asked the 1 rank it waits for" \
  "NO ANSWER from rank 1 on host"; do
  grep -qF -- "$want" <<<"$line" || fail "rank 0's message lacks: $want"
done
echo PASS
