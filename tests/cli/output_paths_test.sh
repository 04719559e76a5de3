#!/usr/bin/env bash
# Every output path is checked before the first step: an unwritable checkpoint.dir, --export
# directory, logging.trace_file (each rank's own file), logging.metrics_file or logging.tensorboard_dir
# ends `lattice train`
# with exit 2 naming the field, the path and the system's reason, without training a step (before,
# checkpoint.dir and --export failed only after training). "Unwritable" here is a path under a
# regular file: the tests run as root, whom permissions do not stop.
source tests/checkpoint/resume_lib.sh

base=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=5)
touch "$WORK/afile"

# refused NP NEEDLE lattice-args...: exit 2 with NEEDLE, and no step ran.
refused() {
  local np=$1 needle=$2 out rc=0
  shift 2
  local cmd=($LATTICE "${base[@]}" "$@")
  [[ $np -gt 1 ]] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" "${cmd[@]}")
  out=$(timeout 60 "${cmd[@]}" 2>&1 </dev/null) || rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from: ${cmd[*]} -- $(tail -3 <<<"$out")"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $(tail -3 <<<"$out")"
  grep -q "step *1/" <<<"$out" && fail "trained before refusing: ${cmd[*]}"
  echo "ok: $needle"
}

refused 1 "checkpoint.dir '$WORK/afile/ckpt' is not writable: cannot create the directory: Not a directory" \
  --set checkpoint.dir="$WORK/afile/ckpt"
refused 1 "--export '$WORK/afile/hf' is not writable: cannot create the directory: Not a directory" \
  --export "$WORK/afile/hf"
refused 1 "logging.trace_file '$WORK/afile/t.rank0.json' is not writable: cannot create its directory '$WORK/afile': Not a directory" \
  --set logging.trace_file="$WORK/afile/t.json"
refused 1 "logging.metrics_file '$WORK/afile/m.jsonl' is not writable: cannot create its directory '$WORK/afile': Not a directory" \
  --set logging.metrics_file="$WORK/afile/m.jsonl"
refused 1 "logging.metrics_file '$WORK' is not writable: it is a directory, not a file" --set logging.metrics_file="$WORK"
refused 1 "logging.tensorboard_dir '$WORK/afile/tb' is not writable: cannot create the directory: Not a directory" \
  --set logging.tensorboard_dir="$WORK/afile/tb"
# Under mpirun: every rank checks what it writes (here only rank 1's trace file is unwritable).
mkdir -p "$WORK/traces"
touch "$WORK/traces/1"
refused 2 "logging.trace_file '$WORK/traces/1/t.json' is not writable: cannot create its directory '$WORK/traces/1': Not a directory" \
  --set parallel.data=2 --set logging.trace_file="$WORK/traces/{rank}/t.json"
refused 2 "checkpoint.dir '$WORK/afile/ckpt' is not writable" --set parallel.data=2 --set checkpoint.dir="$WORK/afile/ckpt"
# A path no rank can write is reported once (rank 0), not by every rank.
out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE "${base[@]}" --set parallel.data=2 \
  --set checkpoint.dir="$WORK/afile/ckpt" 2>&1 </dev/null) && fail "an unwritable checkpoint.dir was accepted"
[[ $(grep -c "\[error\]" <<<"$out") -eq 1 ]] || fail "not one error line: $out"
echo "ok: one error line for a path no rank can write"

# validate refuses what train would, and writes nothing (no directory created, no probe file).
validate_refuses() {  # validate_refuses NEEDLE lattice-args...
  local needle=$1 out rc=0
  shift
  out=$($LATTICE validate --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" "$@" 2>&1) || rc=$?
  [[ $rc -eq 2 ]] && grep -qF -- "$needle" <<<"$out" || fail "validate $*: exit $rc, output: $(tail -3 <<<"$out")"
  echo "ok: validate: $needle"
}
validate_refuses "checkpoint.dir '$WORK/afile/ckpt' is not writable: '$WORK/afile' exists and is not a directory" \
  --set checkpoint.dir="$WORK/afile/ckpt"
validate_refuses "logging.run_dir '$WORK/afile/run' is not writable" --set logging.run_dir="$WORK/afile/run"
validate_refuses "logging.metrics_file '$WORK' is not writable: it is a directory, not a file" \
  --set logging.metrics_file="$WORK"
$LATTICE validate --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set logging.run_dir="$WORK/v/run" \
  >/dev/null 2>&1 || fail "validate refused a run folder that does not exist yet"
[[ ! -e $WORK/v ]] || fail "validate created '$WORK/v'"
echo "ok: validate creates nothing"

# Writable paths in directories that do not exist yet: created, and no probe file is left behind.
out=$WORK/new/a/b
run 2 "$WORK/ok.log" "${base[@]}" --set parallel.data=2 --set checkpoint.dir="$out/ckpt" \
  --set logging.trace_file="$out/trace/t.json" --set logging.metrics_file="$out/metrics/m.jsonl" --export "$out/hf" \
  --set logging.tensorboard_dir="$out/tb"
[[ -f $out/ckpt/latest && -f $out/hf/model.safetensors && -f $out/trace/t.rank1.json && -s $out/metrics/m.jsonl &&
   $(ls "$out"/tb/events.out.tfevents.* | wc -l) -eq 1 ]] ||
  fail "a run with new output directories did not write its outputs"
leftover=$(find "$out" -name '.lattice-write-probe-*')
[[ -z $leftover ]] || fail "probe files left behind: $leftover"
echo "ok: new output directories are created and nothing of the checks is left behind"
echo PASS
