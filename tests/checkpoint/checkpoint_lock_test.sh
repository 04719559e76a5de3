#!/usr/bin/env bash
# One run at a time per checkpoint.dir: a second run — one process or a whole mpirun job — is refused
# with exit 2 naming the holder's host and pid, before it trains a step; the lock is released when
# the holder ends; a lock left by a run killed with SIGKILL is taken over with a message naming it.
source tests/checkpoint/resume_lib.sh

base=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set logging.log_interval=100
      --set checkpoint.load=none)  # every run starts at step 1
host=$(hostname)

# start_holder NP NAME: a long run (one process or mpirun -np NP) on $WORK/ckpt, up to its step 3.
start_holder() {
  local np=$1 name=$2
  local cmd=($LATTICE "${base[@]}" --set training.train_iters=100000 --set checkpoint.dir="$WORK/ckpt"
             --set logging.metrics_file="$WORK/$name.jsonl")
  [[ $np -gt 1 ]] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" "${cmd[@]}" --set parallel.data="$np")
  "${cmd[@]}" >"$WORK/$name.log" 2>&1 </dev/null &
  holder=$!
  wait_for_step "$WORK/$name.jsonl" 3 $holder "$WORK/$name.log"
}

# expect_refused NP HOLDER_PID: a second run (NP ranks) on the same directory ends with exit 2 naming
# the holder, before its first step.
expect_refused() {
  local np=$1 holder_pid=$2 out rc=0
  local cmd=($LATTICE "${base[@]}" --set training.train_iters=3 --set checkpoint.dir="$WORK/ckpt")
  [[ $np -gt 1 ]] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" "${cmd[@]}" --set parallel.data="$np")
  out=$(timeout 60 "${cmd[@]}" 2>&1 </dev/null) || rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from a second run (np $np) on a locked checkpoint.dir: $out"
  local needle="checkpoint.dir '$WORK/ckpt' is in use by another run (host $host, pid $holder_pid; lock file $WORK/ckpt/lattice.lock)"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
  grep -q "step *1/" <<<"$out" && fail "the refused run trained: $out"
  echo "ok: a second run (np $np) on a locked checkpoint.dir -> exit 2 naming host $host, pid $holder_pid"
}

# 1. A one-process holder refuses a one-process run and a 2-rank job; its clean stop releases the lock.
start_holder 1 one
expect_refused 1 $holder
expect_refused 2 $holder
[[ $(cat "$WORK/ckpt/lattice.lock") == "host $host, pid $holder" ]] || fail "the lock file does not name the holder"
kill -TERM $holder
wait $holder || fail "the holder did not stop with exit 0"
[[ ! -s $WORK/ckpt/lattice.lock ]] || fail "the lock was not released: $(cat "$WORK/ckpt/lattice.lock")"
run 1 "$WORK/after.log" "${base[@]}" --set training.train_iters=3 --set checkpoint.dir="$WORK/ckpt"
grep -q "stale lock" "$WORK/after.log" && fail "a cleanly released lock was reported as stale"
echo "ok: released on a clean stop; the next run takes it silently"

# 2. A 2-rank job holds it (rank 0 takes it for the job): refused, then killed with SIGKILL.
start_holder 2 job
rank0=$(rank_pid 0)
expect_refused 1 "$rank0"
kill -KILL "$rank0"  # mpirun then ends the other rank
wait $holder || true
run 1 "$WORK/takeover.log" "${base[@]}" --set training.train_iters=3 --set checkpoint.dir="$WORK/ckpt"
grep -q "took over the stale lock left by host $host, pid $rank0 (that run ended without releasing it" "$WORK/takeover.log" ||
  { tail -5 "$WORK/takeover.log"; fail "no stale-lock message"; }
[[ ! -s $WORK/ckpt/lattice.lock ]] || fail "the lock was not released after the takeover run"
echo "ok: the lock of a killed job is taken over, with a message naming it"
echo PASS
