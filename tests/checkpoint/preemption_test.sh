#!/usr/bin/env bash
# Preemption: a signal on one rank stops every rank after the same step with a checkpoint of that
# step and exit 0, and the resumed run continues exactly.
#
# The runs use a constant LR after warmup (optimizer.decay constant), so that the schedule does not
# depend on train_iters: the signalled job runs with train_iters 100000 (it cannot finish before
# the signal lands), stops after some step N, and the uninterrupted reference and the resumed job
# both end at step N + 10.
#  1. PP2: SIGTERM to rank 1 alone (rank 0 learns of it through the per-step agreement).
#  2. One process: SIGUSR1 (Slurm's --signal), with save_interval set too.
#  3. A bare mpirun -np 2 given SIGTERM: the ranks save, but mpirun exits 1 (what the README says).
#     tools/launch_mpirun.sh: SIGTERM to the launcher reaches the ranks as SIGUSR1 through mpirun;
#     exit 0 without a restart; the launcher started again resumes and completes the run. Every
#     other stop signal — SIGTERM and SIGINT to the launcher's whole process group (a terminal's
#     Ctrl-C reaches mpirun too unless the launcher keeps it apart), SIGHUP, SIGUSR1 — also ends it
#     with a checkpoint and exit 0; and it sets OMP_NUM_THREADS from the cores per rank.
#  4. training.exit_duration_mins spent: the same stop after the first step past it.
#  5. No checkpoint.dir: a warning that nothing is saved, still exit 0.
source tests/checkpoint/resume_lib.sh

base=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set optimizer.decay=constant
      --set logging.log_interval=100)

# stop_and_resume NAME NP SIGNAL overrides...: the signalled job, the reference, the resumed job.
stop_and_resume() {
  local name=$1 np=$2 sig=$3
  shift 3
  local d=$WORK/$name
  local ckpt=(--set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d-run.jsonl")
  if [[ $np -gt 1 ]]; then
    mpirun --allow-run-as-root --oversubscribe -np "$np" $LATTICE "${base[@]}" "$@" "${ckpt[@]}" \
      --set training.train_iters=100000 >"$d-stopped.log" 2>&1 </dev/null &
  else
    $LATTICE "${base[@]}" "$@" "${ckpt[@]}" --set training.train_iters=100000 >"$d-stopped.log" 2>&1 </dev/null &
  fi
  local job=$! target
  wait_for_step "$d-run.jsonl" 5 $job "$d-stopped.log"
  target=$job
  [[ $np -gt 1 ]] && { target=$(rank_pid 1) || fail "rank 1 not found"; }
  kill -"$sig" "$target"
  local rc=0
  wait $job || rc=$?
  [[ $rc -eq 0 ]] || { tail -20 "$d-stopped.log"; fail "$name: exit $rc after SIG$sig (want 0)"; }
  local latest step
  latest=$(cat "$d/ckpt/latest")
  step=$((10#${latest#iter_}))
  grep -q "stopped by SIG$sig after step $step; checkpoint $latest saved" "$d-stopped.log" ||
    { tail -5 "$d-stopped.log"; fail "$name: no stop message for step $step"; }
  grep -q "\"step\":$((step + 1))," "$d-run.jsonl" && fail "$name: a step after $step ran"
  echo "$name: SIG$sig stopped every rank after step $step with $latest, exit 0"
  # The reference saves too (its own directory): saving must not change the numbers.
  run "$np" "$d-full.log" "${base[@]}" "$@" --set training.train_iters=$((step + 10)) \
    --set checkpoint.dir="$d/reference-ckpt" --set logging.metrics_file="$d-full.jsonl" --export "$d-full"
  run "$np" "$d-resumed.log" "${base[@]}" "$@" "${ckpt[@]}" --set training.train_iters=$((step + 10)) --export "$d-resumed"
  grep -q "resumed from $d/ckpt/$latest: step $step" "$d-resumed.log" || fail "$name: did not resume at step $step"
  python3 tests/checkpoint/compare_resumed.py "$d-full.jsonl" "$d-run.jsonl" "$d-full" "$d-resumed"
}

stop_and_resume pp2 2 TERM --set parallel.pipeline=2
stop_and_resume one 1 USR1 --set checkpoint.save_interval=3

# 3. A bare mpirun, then the launcher.
d=$WORK/bare
mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE "${base[@]}" --set parallel.data=2 \
  --set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl" --set training.train_iters=100000 \
  >"$d.log" 2>&1 </dev/null &
job=$!
wait_for_step "$d.jsonl" 5 $job "$d.log"
kill -TERM $job
rc=0
wait $job || rc=$?
latest=$(cat "$d/ckpt/latest")
grep -q "stopped by SIGTERM after step $((10#${latest#iter_})); checkpoint $latest saved" "$d.log" ||
  { tail "$d.log"; fail "bare mpirun: the ranks did not save on SIGTERM"; }
[[ $rc -eq 1 ]] || fail "bare mpirun: exit $rc after SIGTERM; the README says 1 (update it)"
echo "bare mpirun: SIGTERM -> the ranks saved $latest, mpirun exited $rc"

d=$WORK/launcher
threads=$(($(nproc) / 2))  # the launcher's OMP_NUM_THREADS for 2 ranks on this node
[[ $threads -ge 1 ]] || threads=1
launch=(env -u OMP_NUM_THREADS --default-signal=INT LATTICE=$LATTICE tools/launch_mpirun.sh -n 2 configs/test-tiny-gpt2.json
        --set data.path="$WORK/tiny" --set parallel.data=2 --set checkpoint.dir="$d/ckpt"
        --set logging.metrics_file="$d.jsonl" --set logging.log_interval=100)
# stop_launcher HOW: starts the launcher in its own process group (a shell's job), waits for 5 more
# steps, sends the signal (kill HOW, with $job the launcher's pid and process group), expects a
# checkpoint and exit 0 without a restart.
stop_launcher() {
  local log=$d-${1//[^A-Z]/}.log steps
  steps=$(grep -c '"step"' "$d.jsonl" 2>/dev/null) || steps=0
  setsid "${launch[@]}" --set training.train_iters=100000 >"$log" 2>&1 </dev/null &
  job=$!
  wait_for_step "$d.jsonl" $((steps + 5)) $job "$log"
  eval "kill $1"
  local rc=0
  wait $job || rc=$?
  [[ $rc -eq 0 ]] || { tail -20 "$log"; fail "launcher: exit $rc after kill $1 (want 0)"; }
  grep -q "stopped by SIGUSR1 after step" "$log" || { tail "$log"; fail "launcher: the ranks did not stop on SIGUSR1"; }
  grep -q "exited 0 after a stop request" "$log" || fail "launcher: no stop report after kill $1"
  [[ $(grep -c "launch_mpirun: start" "$log") -eq 1 ]] || fail "launcher: restarted after kill $1"
  grep -q "launch_mpirun: 2 rank(s) per node on .*: OMP_NUM_THREADS=$threads" "$log" || fail "launcher: no thread report"
  grep -q "BLAS: OpenBLAS .* threads=$threads" "$log" || fail "launcher: the ranks do not run $threads thread(s)"
  echo "launcher: kill $1 -> SIGUSR1 to the ranks, $(cat "$d/ckpt/latest") saved, exit 0"
}
stop_launcher '-TERM $job'
stop_launcher '-TERM -- -$job'
stop_launcher '-INT -- -$job'
stop_launcher '-HUP $job'
stop_launcher '-USR1 $job'
latest=$(cat "$d/ckpt/latest")
step=$((10#${latest#iter_}))
"${launch[@]}" --set training.train_iters=$((step + 3)) >"$d-2.log" 2>&1 </dev/null || { tail "$d-2.log"; fail "launcher: the second start failed"; }
grep -q "resumed from $d/ckpt/$latest: step $step" "$d-2.log" || fail "launcher: the second start did not resume"
grep -q "\"step\":$((step + 3))," "$d.jsonl" || fail "launcher: the run did not complete"
echo "launcher: restarted, resumed from step $step and completed"

# 4. The wall-clock budget (0.0005 min = 30 ms; each step of the tiny model takes a few ms).
d=$WORK/duration
run 2 "$d.log" "${base[@]}" --set parallel.data=2 --set training.train_iters=100000 \
  --set training.exit_duration_mins=0.0005 --set checkpoint.dir="$d/ckpt"
grep -q "stopped by training.exit_duration_mins (0.0005 min) after step [0-9]*; checkpoint iter_[0-9]* saved" "$d.log" ||
  { tail "$d.log"; fail "exit_duration_mins: no stop message"; }

# 5. No checkpoint.dir.
$LATTICE "${base[@]}" --set training.train_iters=100000 --set logging.metrics_file="$WORK/nodir.jsonl" \
  >"$WORK/nodir.log" 2>&1 </dev/null &
job=$!
wait_for_step "$WORK/nodir.jsonl" 3 $job "$WORK/nodir.log"
kill -TERM $job
rc=0
wait $job || rc=$?
[[ $rc -eq 0 ]] || fail "no checkpoint.dir: exit $rc after SIGTERM"
grep -q "on SIGTERM: checkpoint.dir is not set, so nothing is saved" "$WORK/nodir.log" || { tail -3 "$WORK/nodir.log"; fail "no warning"; }
echo PASS
