#!/usr/bin/env bash
# logging.profile_step_start..end (Megatron's --profile-step-start/-end): the steps run between
# cudaProfilerStart and cudaProfilerStop, for nsys --capture-range=cudaProfilerApi. On the CPU
# emulator of the CUDA backend, whose runtime logs each call (tests/cuda_emu/runtime_emu.cc): the
# calls sit between the right step lines, once each; a job stopped inside the range closes it, and
# a job resumed inside it opens it before its first step; the config errors exit 2 naming the keys.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
fail() { echo "FAIL: $*"; exit 1; }
common=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=6
        --set logging.profile_step_start=2 --set logging.profile_step_end=4)

# order LOG LINE...: each pattern matches exactly one line of LOG, in the order given.
order() {
  local log=$1 previous=0 n pattern
  shift
  for pattern in "$@"; do
    [[ $(grep -cE "$pattern" "$log") -eq 1 ]] || fail "$log: expected one line matching '$pattern': $(grep -E "$pattern" "$log")"
    n=$(grep -nE "$pattern" "$log" | cut -d: -f1)
    [[ $n -gt $previous ]] || fail "$log: '$pattern' (line $n) is not after the previous line ($previous)"
    previous=$n
  done
}

"$LATTICE" train "${common[@]}" --set device=cuda >"$WORK/whole.log" 2>&1 || fail "run: $(tail -3 "$WORK/whole.log")"
order "$WORK/whole.log" "step +1/6 " "emulated cudaProfilerStart" "opened before step 2" "step +2/6 " "step +4/6 " \
  "emulated cudaProfilerStop" "closed after step 4" "step +5/6 "

# Stopped after step 3 (inside the range): closed after it; resumed at step 4: opened before it.
ck=(--set checkpoint.dir="$WORK/ck" --set checkpoint.save_interval=3)
"$LATTICE" train "${common[@]}" "${ck[@]}" --set device=cuda --set training.exit_interval=3 >"$WORK/job1.log" 2>&1 ||
  fail "job 1: $(tail -3 "$WORK/job1.log")"
order "$WORK/job1.log" "step +1/6 " "emulated cudaProfilerStart" "step +3/6 " "emulated cudaProfilerStop" \
  "closed after step 3"
"$LATTICE" train "${common[@]}" "${ck[@]}" --set device=cuda >"$WORK/job2.log" 2>&1 || fail "job 2: $(tail -3 "$WORK/job2.log")"
order "$WORK/job2.log" "emulated cudaProfilerStart" "opened before step 4" "step +4/6 " "emulated cudaProfilerStop" \
  "step +5/6 "

# expect_error NAME MESSAGE [overrides...]: exit 2 and the message.
expect_error() {
  local name=$1 message=$2 status=0
  shift 2
  "$LATTICE" train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" "$@" >"$WORK/$name.log" 2>&1 ||
    status=$?
  [[ $status -eq 2 ]] || fail "$name: exit $status, expected 2: $(tail -2 "$WORK/$name.log")"
  grep -qF "$message" "$WORK/$name.log" || fail "$name: no '$message' in: $(tail -2 "$WORK/$name.log")"
}
expect_error cpu 'logging.profile_step_start is set but device is "cpu"' --set logging.profile_step_start=2 \
  --set logging.profile_step_end=3
expect_error reversed "logging.profile_step_start (3) and logging.profile_step_end (2) must both be set, start <= end" \
  --set device=cuda --set logging.profile_step_start=3 --set logging.profile_step_end=2
expect_error past_end "logging.profile_step_start (30) is past training.train_iters (20)" --set device=cuda \
  --set logging.profile_step_start=30 --set logging.profile_step_end=40
expect_error end_only "logging.profile_step_start (0) and logging.profile_step_end (4) must both be set" \
  --set device=cuda --set logging.profile_step_end=4
echo "PASS"
