#!/usr/bin/env bash
# `lattice bench --config` is a scratch measurement: given a config whose logging.run_dir is an
# existing run folder, it leaves every file there byte-identical (no resume from its checkpoint, no
# config.json, log, metrics, TensorBoard or trace written) and creates no run folder that is not
# there; keys that would stop it early or run work between steps are ignored; its figures are
# finite; FLOPs per token keep their digits for a tiny model; --steps below 3 and mpirun -np 2 exit 2
# saying what to do; a trace asked for on bench's own command line is still written.
set -uo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}  # no BLAS re-exec line
prepare_tiny_dataset

expect_exit2() {  # expect_exit2 "needle" cmd...
  local needle=$1; shift
  local out; out=$("$@" 2>&1 </dev/null); local rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from: $* -- $out"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
  echo "ok: exit 2 naming '$needle'"
}
# checks_finite FILE: bench's report has its figures, none of them inf, nan or a zero rate.
checks_finite() {
  grep -qE "^tokens/s +: [0-9]" "$1" || fail "no tokens/s line: $(cat "$1")"
  grep -qiwE "inf|nan" "$1" && fail "a figure is inf or nan: $(cat "$1")"
  grep -qE "^tokens/s +: 0\.0$" "$1" && fail "tokens/s 0.0: $(cat "$1")"
  grep -qE "^steps timed +: 2 \(after 1 warm-up step\)$" "$1" || fail "want 2 steps timed: $(grep timed "$1")"
  grep -qF "for lattice plan --gpu FILE" "$1" || fail "no plan line: $(cat "$1")"
}
listing() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }

BASE=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny")
R=$WORK/run
timeout 120 $LATTICE train "${BASE[@]}" --set logging.run_dir="$R" --set training.train_iters=2 \
  --set checkpoint.save_interval=1 >"$WORK/train.log" 2>&1 </dev/null || fail "train: $(tail -3 "$WORK/train.log")"
for f in config.json log.txt metrics.jsonl checkpoints/latest trace.rank0.json; do
  [[ -f $R/$f ]] || fail "the run folder lacks $f"
done
ls "$R"/tensorboard/events.out.tfevents.* >/dev/null || fail "the run folder lacks a TensorBoard event file"
listing "$R" >"$WORK/before.txt"

# The same config and run folder: 3 steps from step 1 on synthetic tokens, nothing of the run touched.
timeout 120 $LATTICE bench "${BASE[@]}" --set logging.run_dir="$R" --set training.train_iters=2 \
  --set checkpoint.save_interval=1 --steps 3 >"$WORK/bench.txt" 2>"$WORK/bench.log" </dev/null ||
  fail "bench: $(tail -3 "$WORK/bench.log")"
listing "$R" >"$WORK/after.txt"
diff "$WORK/before.txt" "$WORK/after.txt" || fail "bench changed the run folder $R"
grep -qi "resum" "$WORK/bench.log" && fail "bench resumed: $(grep -i resum "$WORK/bench.log")"
checks_finite "$WORK/bench.txt"
echo "ok: bench left every file of the run folder byte-identical; figures finite"

# FLOPs per token: 209.1 kFLOP for the tiny model, not 0.000 GFLOP.
grep -qE "^training FLOPs per token +: [1-9][0-9.]* kFLOP" "$WORK/bench.txt" ||
  fail "FLOPs per token: $(grep "FLOPs per token" "$WORK/bench.txt")"
echo "ok: $(grep "FLOPs per token" "$WORK/bench.txt")"

# A run folder that does not exist is not created, so a later train there starts from step 1; keys
# that stop a run early or run work between its steps (and every output key) leave the 3 steps timed.
F=$WORK/fresh
timeout 120 $LATTICE bench "${BASE[@]}" --set logging.run_dir="$F" --set training.exit_interval=1 \
  --set training.exit_duration_mins=1e-9 --set training.sample_interval=1 --set training.eval_interval=1 \
  --set logging.metrics_file="$WORK/m.jsonl" --set logging.tensorboard_dir="$WORK/tb" \
  --set checkpoint.dir="$WORK/ckpt" --steps 3 >"$WORK/bench2.txt" 2>"$WORK/bench2.log" </dev/null ||
  fail "bench with exit_interval: $(tail -3 "$WORK/bench2.log")"
for p in "$F" "$WORK/m.jsonl" "$WORK/tb" "$WORK/ckpt"; do [[ -e $p ]] && fail "bench created $p"; done
checks_finite "$WORK/bench2.txt"
echo "ok: no run folder, metrics, TensorBoard or checkpoint created; exit_interval etc. ignored"

# A trace asked for on bench's own command line is written (and only that).
timeout 120 $LATTICE bench "${BASE[@]}" --set logging.trace_file="$WORK/bench_trace.json" --steps 3 \
  >/dev/null 2>"$WORK/bench3.log" </dev/null || fail "bench with a trace: $(tail -3 "$WORK/bench3.log")"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['traceEvents']" "$WORK/bench_trace.rank0.json" ||
  fail "bench --set logging.trace_file wrote no trace"
echo "ok: --set logging.trace_file on bench's command line writes its trace"

# Too few steps to time, and one benchmark per rank under mpirun: exit 2, saying what to do.
expect_exit2 "--steps 2: lattice bench needs at least 3 steps" $LATTICE bench "${BASE[@]}" --steps 2
out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE bench "${BASE[@]}" --steps 3 2>&1 </dev/null)
rc=$?
[[ $rc -eq 2 ]] || fail "mpirun -np 2 lattice bench --config: exit $rc (want 2): $out"
for needle in "lattice bench --config times one process, but the launcher started 2 (OMPI_COMM_WORLD_SIZE=2)" \
  "\`mpirun -np 2 lattice train --config ...\`" "\`mpirun -np 2 lattice bench --comm\`"; do
  grep -qF -- "$needle" <<<"$out" || fail "mpirun -np 2 lattice bench: message lacks '$needle': $out"
done
grep -q "^tokens/s" <<<"$out" && fail "mpirun -np 2 lattice bench ran a benchmark"
echo "ok: mpirun -np 2 lattice bench --config exits 2 pointing to lattice train and bench --comm"
echo PASS
