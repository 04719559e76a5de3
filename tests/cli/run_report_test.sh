#!/usr/bin/env bash
# logging.run_dir and `lattice report` end to end: three tiny trainings at different learning rates,
# each in its own run folder — one finished after a resume, one stopped, one failed before its first
# step — then the report's table and CSV against their metrics files, and report --plot's PNG (tools/plot_runs.py).
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset

runs=$WORK/runs
rm -rf "$runs"
train() {  # train RUN LR [args...]: the tiny GPT-2 in $runs/RUN, stopping after every 4th step
  local run=$1 lr=$2
  shift 2
  timeout 120 $LATTICE train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" \
    --set training.train_iters=8 --set training.exit_interval=4 --set training.eval_interval=4 \
    --set training.eval_iters=2 --set logging.peak_gflops=1000 --set logging.run_dir="$runs/$run" \
    --set optimizer.lr="$lr" "$@"
}

# validate prints the resolved paths.
$LATTICE validate --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set logging.run_dir="$runs/a" >"$WORK/validate.txt"
grep -q "\"metrics_file\": \"$runs/a/metrics.jsonl\"" "$WORK/validate.txt" || fail "validate: no resolved metrics_file"
grep -q "\"dir\": \"$runs/a/checkpoints\"" "$WORK/validate.txt" || fail "validate: no resolved checkpoint.dir"

# a: stops after step 4, then the same command resumes from a/checkpoints and finishes at step 8.
train a 1e-3 >"$WORK/a1.log" 2>&1 || { tail -5 "$WORK/a1.log"; fail "a, job 1"; }
train a 1e-3 >"$WORK/a2.log" 2>&1 || { tail -5 "$WORK/a2.log"; fail "a, job 2"; }
grep -q "resum.*iter_0000004" "$WORK/a2.log" || { tail -20 "$WORK/a2.log"; fail "a, job 2 did not resume from step 4"; }
for f in config.json log.txt metrics.jsonl trace.rank0.json checkpoints/latest checkpoints/iter_0000008; do
  [[ -e $runs/a/$f ]] || fail "run folder a has no $f"
done
ls "$runs"/a/tensorboard/events.out.tfevents.* >/dev/null || fail "run folder a has no TensorBoard events"
[[ $(grep -c run_start "$runs/a/metrics.jsonl") -eq 2 ]] || fail "a's metrics file does not hold both jobs"
[[ $(grep -c "run summary" "$runs/a/log.txt") -eq 2 ]] || fail "a's log.txt does not hold both jobs"
python3 - "$runs/a/config.json" "$runs/a" <<'PY' || fail "a/config.json is not the resolved config"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["optimizer"]["lr"] == 1e-3 and c["logging"]["run_dir"] == sys.argv[2], c
# run_dir's default outputs are left to it (stored empty), an explicitly placed one is kept.
assert c["checkpoint"]["dir"] == "" and c["logging"]["metrics_file"] == "", c
PY
# Its config.json reused for another run folder writes there, not into a: a's metrics stay as they were.
cp "$runs/a/metrics.jsonl" "$WORK/a-metrics.jsonl"
timeout 120 $LATTICE train --config "$runs/a/config.json" --set logging.run_dir="$runs/a2" \
  --set training.train_iters=2 >"$WORK/a2-copy.log" 2>&1 || { tail -5 "$WORK/a2-copy.log"; fail "a's config reused"; }
cmp -s "$runs/a/metrics.jsonl" "$WORK/a-metrics.jsonl" || fail "a's config reused for a2 appended to a's metrics"
[[ -s $runs/a2/metrics.jsonl && -e $runs/a2/checkpoints/latest ]] || fail "a's config reused: a2 has no metrics/checkpoint"
grep -q "nothing left to train" "$WORK/a2-copy.log" && fail "a's config reused: a2 resumed a's checkpoint"
# ... and with another hidden size, the derived ffn_hidden_size it fixes is named (tiny GPT-2: hidden 32,
# ffn 4 × 32 = 128 in a's config.json; with hidden 64 the config it was made from derives 256).
out=$($LATTICE validate --config "$runs/a/config.json" --set model.hidden_size=64 --set checkpoint.load=none 2>&1 >/dev/null) ||
  fail "validate of a's config with another hidden size: $out"
grep -qF "is a run folder's config.json, which fixes every model key at its resolved value: with these --set, \
model.ffn_hidden_size stays 128 (derived anew: 256)" <<<"$out" || fail "no fixed-default warning: $out"
out=$($LATTICE validate --config "$runs/a/config.json" --set optimizer.lr=1e-4 2>&1 >/dev/null) || fail "validate: $out"
grep -q "fixes every model key" <<<"$out" && fail "a fixed-default warning without a model change: $out"
# b: stopped after step 4.
train b 2e-3 >"$WORK/b.log" 2>&1 || { tail -5 "$WORK/b.log"; fail "b"; }
# c: checkpoint.dir's place is taken by a file: refused before step 1 (exit 2), the error in log.txt.
mkdir -p "$runs/c" && touch "$runs/c/checkpoints"
rc=0
train c 3e-3 >"$WORK/c.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || { tail -5 "$WORK/c.log"; fail "c exited $rc, expected 2"; }
tail -1 "$runs/c/log.txt" | grep -q "\[error\] checkpoint.dir" || fail "c's log.txt does not end with its error"

$LATTICE report "$runs/a" "$runs/b" "$runs/c" >"$WORK/report.txt" 2>"$WORK/report.err" ||
  { cat "$WORK/report.err"; fail "report"; }
$LATTICE report --csv "$runs/a" "$runs/b" "$runs/c" >"$WORK/report.csv" 2>"$WORK/report.err" ||
  { cat "$WORK/report.err"; fail "report --csv"; }
cat "$WORK/report.txt"
python3 tests/cli/verify_run_report.py "$WORK/report.txt" "$WORK/report.csv" optimizer.lr \
  "$runs/a=finished" "$runs/b=stopped" "$runs/c=failed"

# One output key set to a path of its own wins over the run folder; the report follows it.
train d 1e-3 --set logging.metrics_file="$WORK/d-metrics.jsonl" >"$WORK/d.log" 2>&1 || fail "d"
[[ -s $WORK/d-metrics.jsonl && ! -e $runs/d/metrics.jsonl && -e $runs/d/checkpoints/latest ]] ||
  fail "d: logging.metrics_file did not win over the run folder"
$LATTICE report --csv "$runs/d" | grep -q ",stopped,4," || fail "report of d does not read $WORK/d-metrics.jsonl"

# Missing and malformed files: exit 2 naming the file.
expect_error() {  # expect_error TEXT RUN_DIR
  local rc=0
  $LATTICE report "$2" >/dev/null 2>"$WORK/err.txt" || rc=$?
  [[ $rc -eq 2 ]] && grep -qF "$1" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "report $2: rc $rc"; }
}
expect_error "$runs/none/config.json" "$runs/none"
mkdir -p "$runs/empty" && echo '{"training": {}}' >"$runs/empty/config.json"
expect_error "'$runs/empty/config.json' is not a run's resolved config" "$runs/empty"
cp -r "$runs/b" "$runs/bad" && echo '{"step": 9, "loss"' >>"$runs/bad/metrics.jsonl"
expect_error "'$runs/bad/metrics.jsonl' line $(wc -l <"$runs/bad/metrics.jsonl") is not JSON" "$runs/bad"
rm "$runs/bad/metrics.jsonl"
expect_error "$runs/bad/metrics.jsonl" "$runs/bad"

# The plot (report --plot runs tools/plot_runs.py): a PNG of the configured size (1500 x 450 pixels),
# and the table still printed.
$LATTICE report --plot "$WORK/runs.png" "$runs/a" "$runs/b" "$runs/c" >"$WORK/plot.out" 2>"$WORK/plot.err" ||
  { cat "$WORK/plot.err"; fail "report --plot"; }
grep -q "^run " "$WORK/plot.out" || fail "report --plot printed no table: $(head -3 "$WORK/plot.out")"
python3 - "$WORK/runs.png" <<'PY' || fail "runs.png"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1500, 450), (width, height)
assert len(data) > 20000, f"{len(data)} bytes: an empty picture?"
print(f"ok: {sys.argv[1]}: {width} x {height}, {len(data)} bytes")
PY

# A refused resume changes nothing in the folder but its log: b's checkpoint holds another global
# batch size, or another model (exit 2); config.json stays b's, log.txt ends with the error and the
# report calls b failed — the model's error last, several lines long.
cp "$runs/b/config.json" "$WORK/b-config.json"
for refused in training.global_batch_size=16 model.hidden_size=64; do
  rc=0
  train b 2e-3 --set "$refused" >"$WORK/b-refused.log" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || { tail -5 "$WORK/b-refused.log"; fail "b resumed with $refused: exit $rc, expected 2"; }
  cmp -s "$runs/b/config.json" "$WORK/b-config.json" || fail "the refused resume with $refused rewrote b/config.json"
  grep -q "\[error\] checkpoint '$runs/b/checkpoints/iter_0000004'" "$runs/b/log.txt" ||
    fail "b's log.txt does not hold the error of the resume with $refused"
  $LATTICE report --csv "$runs/b" | grep -q ",failed,4," ||
    fail "report does not call b failed after the resume with $refused: $($LATTICE report "$runs/b")"
done
# A finished run stays finished when a later start is refused: the refusal changed nothing of it
# (a sweep would otherwise train the point again).
rc=0
train a 1e-3 --set training.global_batch_size=16 >"$WORK/a-refused.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || { tail -5 "$WORK/a-refused.log"; fail "a resumed with another global batch: exit $rc, expected 2"; }
$LATTICE report --csv "$runs/a" | grep -q ",finished,8," ||
  fail "report does not call a finished after a refused start: $($LATTICE report "$runs/a")"
tail -1 "$runs/b/log.txt" | grep -q "^set these fields to the checkpoint's values" ||
  fail "b's log.txt does not end with the model error's last line: $(tail -1 "$runs/b/log.txt")"

# A metrics file cut off mid-line (a full disk, a killed run): report leaves the torn line out; the
# next run drops it, says so, and the file stays JSON lines; b then resumes and finishes.
printf '{"step": 5, "loss": 5.1, "gra' >>"$runs/b/metrics.jsonl"
# Before that run, report reads the file as train does: the torn last line is left out, not an error.
$LATTICE report --csv "$runs/b" >"$WORK/torn.csv" 2>&1 || fail "report of a torn last line: $(cat "$WORK/torn.csv")"
train b 2e-3 >"$WORK/b-torn.log" 2>&1 || { tail -5 "$WORK/b-torn.log"; fail "b after a torn metrics line"; }
grep -q "\[warning\] logging.metrics_file '$runs/b/metrics.jsonl' ended in a torn line.*dropped its last 29 byte" \
  "$runs/b/log.txt" || fail "b's log.txt does not say the torn metrics line was dropped"
$LATTICE report --csv "$runs/b" | grep -q ",finished,8," || fail "report of b after the torn line: $($LATTICE report "$runs/b")"

# --export into the run folder itself, however spelled: refused before training (both write config.json).
rc=0
train e 1e-3 --export "$runs/e/./" >"$WORK/e.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -qF -- "--export '$runs/e/./' is the run folder logging.run_dir" "$WORK/e.log" ||
  { tail -3 "$WORK/e.log"; fail "--export into the run folder: exit $rc"; }
[[ ! -e $runs/e/checkpoints ]] || fail "--export into the run folder was refused only after training"

echo "ok: run folders and report"
