#!/usr/bin/env bash
# `lattice report` and tools/plot_runs.py on run folders that run_report_test.sh does not make:
#  - a run still training (its checkpoint root's lattice.lock held) is `running`, then `finished`
#    once it ends; a run killed with kill -9 (its lock file still naming it, the flock gone) `failed`;
#  - old run folders whose config.json stores a relative logging.metrics_file (relative to the
#    directory the run was started from), reported and plotted from another directory: a path into
#    the run's own folder however spelled, the folder's own metrics.jsonl when the stored path is not
#    found, and else a clear error naming the path (plot_runs.py: not "no training steps").
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset
BIN=$PWD/$LATTICE
PLOT=$PWD/tools/plot_runs.py
export MPLCONFIGDIR=$WORK/matplotlib
runs=$WORK/live
rm -rf "$runs" && mkdir -p "$runs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
train_bg() {  # train_bg RUN ITERS: the tiny GPT-2 in $runs/RUN, in the background (the pid in $pid)
  "$BIN" train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters="$2" \
    --set logging.run_dir="$runs/$1" >"$WORK/$1.log" 2>&1 </dev/null &
  pid=$!
  pids+=("$pid")
}
wait_for_step() {  # wait_for_step RUN PID: until RUN's metrics file holds a training step
  for _ in $(seq 1200); do
    grep -q '"loss"' "$runs/$1/metrics.jsonl" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { tail -5 "$WORK/$1.log"; fail "$1 ended before its first step"; }
    sleep 0.05
  done
  fail "$1: no step within 60 s"
}
status_of() { "$BIN" report --csv "$runs/$1" | sed -n 2p | grep -oE ',(finished|stopped|running|failed),[0-9]+,' | cut -d, -f2; }

# 1. A live run: running (table and CSV), then finished.
train_bg live 4000
wait_for_step live "$pid"
"$BIN" report "$runs/live" >"$WORK/live.txt" || fail "report of the live run"
"$BIN" report --csv "$runs/live" >"$WORK/live.csv" || fail "report --csv of the live run"
kill -0 "$pid" 2>/dev/null || fail "the live run ended before the report: give it more steps"
grep -E "^$runs/live +running +[0-9]+" "$WORK/live.txt" || { cat "$WORK/live.txt"; fail "the live run is not reported running"; }
python3 - "$WORK/live.csv" "$runs/live" <<'PY' || fail "the live run's CSV row"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1 and rows[0]["run"] == sys.argv[2] and rows[0]["status"] == "running", rows
assert int(rows[0]["steps"]) >= 1 and rows[0]["train_loss"] != "" and rows[0]["tokens_per_s"] == "", rows
print(f"ok: live run: running at step {rows[0]['steps']}")
PY
wait "$pid" || { tail -5 "$WORK/live.log"; fail "the live run"; }
[[ $(status_of live) == finished ]] || fail "the live run, ended: $("$BIN" report "$runs/live")"

# 2. kill -9 mid-run: the lock file still names the run, but no process holds it: failed.
train_bg killed 100000
wait_for_step killed "$pid"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[[ -s $runs/killed/checkpoints/lattice.lock ]] || fail "the killed run's lock file is empty: the test shows nothing"
[[ $(status_of killed) == failed ]] || fail "the killed run: $("$BIN" report "$runs/killed")"

# 3. Old run folders, started from $WORK/start with relative paths (the config.json is rewritten to
# the old form: the paths as given, relative), reported from elsewhere ($WORK/elsewhere).
start=$WORK/start elsewhere=$WORK/elsewhere
rm -rf "$start" "$elsewhere" && mkdir -p "$start" "$elsewhere"
(cd "$start" && "$BIN" train --config "$OLDPWD/configs/test-tiny-gpt2.json" --set data.path="$WORK/tiny" \
  --set training.train_iters=2 --set logging.run_dir=runs/q --set logging.metrics_file=runs/quickstart/metrics.jsonl \
  >"$WORK/q.log" 2>&1) || { tail -5 "$WORK/q.log"; fail "run q"; }
[[ -s $start/runs/quickstart/metrics.jsonl ]] || fail "q: no metrics file at runs/quickstart/metrics.jsonl"
rewrite() {  # rewrite RUN_DIR KEY=VALUE...: sets logging.KEY in RUN_DIR/config.json
  python3 - "$@" <<'PY'
import json, sys
path = sys.argv[1] + "/config.json"
c = json.load(open(path))
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    c["logging"][k] = v
json.dump(c, open(path, "w"), indent=2)
PY
}
# a. The metrics file inside the run folder, spelled otherwise than run_dir ("./runs/q2/..."): found in the folder.
cp -r "$start/runs/q" "$start/runs/q2" && cp "$start/runs/quickstart/metrics.jsonl" "$start/runs/q2/metrics.jsonl"
rewrite "$start/runs/q2" run_dir=runs/q2 metrics_file=./runs/q2/metrics.jsonl
(cd "$elsewhere" && "$BIN" report --csv "$start/runs/q2") >"$WORK/q2.csv" 2>"$WORK/q2.err" ||
  { cat "$WORK/q2.err"; fail "report of q2 from another directory"; }
grep -q ",finished,2," "$WORK/q2.csv" || fail "q2: $(cat "$WORK/q2.csv")"
# b. A relative path outside the folder (the quickstart's), an absolute run_dir, and the folder holds
# its own metrics.jsonl: that one.
cp -r "$start/runs/q" "$start/runs/q3" && cp "$start/runs/quickstart/metrics.jsonl" "$start/runs/q3/metrics.jsonl"
rewrite "$start/runs/q3" run_dir="$start/runs/q3" metrics_file=runs/quickstart/metrics.jsonl
(cd "$elsewhere" && "$BIN" report --csv "$start/runs/q3") >"$WORK/q3.csv" 2>"$WORK/q3.err" ||
  { cat "$WORK/q3.err"; fail "report of q3 from another directory"; }
grep -q ",finished,2," "$WORK/q3.csv" || fail "q3: $(cat "$WORK/q3.csv")"
(cd "$elsewhere" && python3 "$PLOT" --output "$WORK/q3.png" "$start/runs/q3") 2>"$WORK/q3plot.err" ||
  { cat "$WORK/q3plot.err"; fail "plot of q3 from another directory"; }
if grep -q "plot_runs:" "$WORK/q3plot.err"; then cat "$WORK/q3plot.err"; fail "plot of q3: not drawn"; fi
# c. Not found anywhere from here (q itself: its metrics went to runs/quickstart/, outside the
# folder): exit 2 naming the stored path and where it is relative to; from the start directory it
# reads. plot_runs.py says the same, not "no training steps".
rewrite "$start/runs/q" run_dir=runs/q metrics_file=runs/quickstart/metrics.jsonl
rc=0
(cd "$elsewhere" && "$BIN" report "$start/runs/q") >/dev/null 2>"$WORK/q.err" || rc=$?
[[ $rc -eq 2 ]] || { cat "$WORK/q.err"; fail "report of q from elsewhere: exit $rc, expected 2"; }
grep -qF "metrics file 'runs/quickstart/metrics.jsonl'" "$WORK/q.err" &&
  grep -qF "relative to the directory the run was started from" "$WORK/q.err" || { cat "$WORK/q.err"; fail "report of q: message"; }
(cd "$start" && "$BIN" report --csv runs/q) | grep -q ",finished,2," || fail "report of q from its start directory"
rc=0
(cd "$elsewhere" && python3 "$PLOT" --output "$WORK/q.png" "$start/runs/q") 2>"$WORK/qplot.err" || rc=$?
cat "$WORK/qplot.err"
[[ $rc -ne 0 ]] || fail "plot_runs.py of q from elsewhere exited 0"
grep -qF "metrics file 'runs/quickstart/metrics.jsonl' not found" "$WORK/qplot.err" &&
  grep -qF "relative to the directory the run was started from" "$WORK/qplot.err" || fail "plot_runs.py of q: message"
if grep -q "no training steps" "$WORK/qplot.err"; then fail "plot_runs.py calls a missing metrics file 'no training steps'"; fi
(cd "$start" && python3 "$PLOT" --output "$WORK/q.png" runs/q) || fail "plot_runs.py of q from its start directory"
# d. A metrics file that holds no step (a run killed before step 1): "no training steps", not "not found".
cp -r "$start/runs/q3" "$start/runs/q4" && head -1 "$start/runs/q3/metrics.jsonl" >"$start/runs/q4/metrics.jsonl"
(cd "$elsewhere" && python3 "$PLOT" --output "$WORK/q4.png" "$start/runs/q4") 2>"$WORK/q4plot.err" || fail "plot of q4"
grep -q "has no training steps" "$WORK/q4plot.err" || { cat "$WORK/q4plot.err"; fail "plot_runs.py of q4: message"; }

echo "ok: running, killed and relative-path run folders"
