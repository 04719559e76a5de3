#!/usr/bin/env bash
# Ctrl-C on a one-process training run:
#  1. The first SIGINT stops after the current step like SIGTERM: it says so at once, saves a
#     checkpoint and exits 0; the next start resumes there, and the metrics file then holds two
#     run_start lines, the second with resumed_from_step.
#  2. A second SIGINT aborts at once (exit 130) even while a save is in flight: the test hook
#     LATTICE_TEST_SLOW_SAVE=5:60 holds step 5's background write open, so step 10's save waits.
#  3. Ctrl-C in a terminal signals the whole foreground process group: tools/launch_mpirun.sh must
#     turn it into SIGUSR1 for the ranks (which save and exit 0); plain mpirun, had it got the SIGINT
#     too, would SIGTERM the ranks, SIGKILL them a second later and exit 1.
# The runs start in their own process group (set -m): a script's background job otherwise ignores
# SIGINT, and lattice leaves an ignored SIGINT ignored.
source tests/checkpoint/resume_lib.sh

base=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set optimizer.decay=constant
      --set logging.log_interval=100 --set training.train_iters=100000)

# start LOG args...: the run in the background, its pid in $job.
start() {
  local log=$1
  shift
  set -m
  $LATTICE "${base[@]}" "$@" >"$log" 2>&1 </dev/null &
  job=$!
  set +m
}

# wait_exit PID SECONDS: the exit code of PID (a child of this shell) in $rc; fails when it is still
# running after SECONDS.
wait_exit() {
  local _
  for _ in $(seq $(($2 * 10))); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$1" 2>/dev/null && { kill -9 "$1"; fail "pid $1 still running $2 s after the signal"; }
  rc=0
  wait "$1" || rc=$?
}

# 1. One SIGINT: save and exit 0, then resume.
d=$WORK/once
start "$d.log" --set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl"
wait_for_step "$d.jsonl" 5 $job "$d.log"
kill -INT $job
wait_exit $job 60
[[ $rc -eq 0 ]] || { tail -5 "$d.log"; fail "first SIGINT: exit $rc (want 0)"; }
grep -q "SIGINT: stopping after the current step and saving a checkpoint" "$d.log" || fail "no message at the SIGINT"
latest=$(cat "$d/ckpt/latest") || fail "no checkpoint after SIGINT"
step=$((10#${latest#iter_}))
grep -q "stopped by SIGINT after step $step; checkpoint $latest saved" "$d.log" || { tail -5 "$d.log"; fail "no stop message"; }
echo "first SIGINT: stopped after step $step with $latest, exit 0"
run 1 "$d-resumed.log" "${base[@]}" --set training.train_iters=$((step + 3)) --set checkpoint.dir="$d/ckpt" \
  --set logging.metrics_file="$d.jsonl"
grep -q "resumed from $d/ckpt/$latest: step $step" "$d-resumed.log" || fail "did not resume at step $step"
python3 - "$d.jsonl" "$step" <<'PY' || fail "run_start lines"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
starts = [r["run_start"] for r in rows if "run_start" in r]
assert [s["resumed_from_step"] for s in starts] == [0, int(sys.argv[2])], starts
assert "run_start" in rows[0], rows[0]
print("run_start lines:", starts)
PY

# 2. Two SIGINTs while a save is in flight: exit 130 at once, no checkpoint committed.
d=$WORK/twice
LATTICE_TEST_SLOW_SAVE=5:60 start "$d.log" --set checkpoint.dir="$d/ckpt" --set checkpoint.save_interval=5 \
  --set logging.metrics_file="$d.jsonl"
wait_for_step "$d.jsonl" 10 $job "$d.log"
kill -INT $job
sleep 1
kill -0 $job 2>/dev/null || { tail -5 "$d.log"; fail "the first SIGINT ended the run during a save"; }
kill -INT $job
wait_exit $job 10
[[ $rc -eq 130 ]] || { tail -5 "$d.log"; fail "second SIGINT: exit $rc (want 130)"; }
grep -q "second SIGINT: aborting now, without saving" "$d.log" || { tail -5 "$d.log"; fail "no abort message"; }
[[ ! -e $d/ckpt/latest ]] || fail "a checkpoint was committed: $(cat "$d/ckpt/latest")"
echo "second SIGINT: aborted at once with exit 130"

# 3. Ctrl-C (SIGINT to the process group) on tools/launch_mpirun.sh with 2 ranks.
d=$WORK/launcher
set -m
env LATTICE=$LATTICE MPIRUN_ARGS=--oversubscribe tools/launch_mpirun.sh -n 2 configs/test-tiny-gpt2.json \
  --set data.path="$WORK/tiny" --set parallel.data=2 --set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl" \
  --set logging.log_interval=100 --set training.train_iters=100000 --set optimizer.decay=constant >"$d.log" 2>&1 </dev/null &
job=$!
set +m
wait_for_step "$d.jsonl" 5 $job "$d.log"
kill -INT -- -$job
wait_exit $job 60
[[ $rc -eq 0 ]] || { tail -5 "$d.log"; fail "launcher: exit $rc after Ctrl-C (want 0)"; }
grep -q "stopped by SIGUSR1 after step" "$d.log" || { tail -5 "$d.log"; fail "launcher: the ranks did not stop on SIGUSR1"; }
grep -q "exited 0 after a stop request" "$d.log" || fail "launcher: no stop report"
echo "launcher: Ctrl-C reached the ranks as SIGUSR1, checkpoint $(cat "$d/ckpt/latest"), exit 0"
echo PASS
