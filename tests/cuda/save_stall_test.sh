#!/usr/bin/env bash
# tools/gpu/save_stall.py ($1), which check.sh runs on a GPU, on metrics files whose stalls are known
# by construction: steps 100 ms apart, and after each save (every 10 steps) steps s+1 and s+2 taking
# longer. Async: +40 and +10 ms, so 50 ms per save; sync: +1000 ms, so 5.0% of it. Noise that must be
# left out: an earlier run in the same file, the start-up steps 1 and 2, a validation line.
set -euo pipefail
script=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'MAKE'
import json, sys

def run(path, extra1_s, extra2_s, steps=35):
    with open(path, "w") as f:
        f.write(json.dumps({"run_start": {}, "time": 0.0}) + "\n")  # an earlier, longer run: 7 s steps
        for s in range(1, 61):
            f.write(json.dumps({"step": s, "loss": 1.0, "time": 7.0 * s}) + "\n")
        f.write(json.dumps({"run_start": {}, "time": 1000.0}) + "\n")
        t = 1000.0
        for s in range(1, steps + 1):
            t += 0.1 + {1: 2.0, 2: 0.3}.get(s, 0.0)
            if s > 2 and (s - 1) % 10 == 0:
                t += extra1_s
            if s > 2 and (s - 2) % 10 == 0:
                t += extra2_s
            f.write(json.dumps({"step": s, "loss": 1.0, "step_ms": 100.0, "time": round(t, 3)}) + "\n")
            if s == 20:
                f.write(json.dumps({"step": s, "val_loss": 1.0, "time": round(t, 3)}) + "\n")

run(sys.argv[1] + "/async.jsonl", 0.040, 0.010)
run(sys.argv[1] + "/sync.jsonl", 1.0, 0.0)
run(sys.argv[1] + "/short.jsonl", 0.0, 0.0, steps=9)
MAKE
out=$(python3 "$script" "$dir/async.jsonl" "$dir/sync.jsonl" 10)
echo "$out"
async_line="async save: stall 50.0 ms per save = 5.0% of the synchronous save (target: at most 5%),"
async_line+=" 50.0% of a median step of 100.0 ms (3 saves)"
for want in "synchronous save: 1000 ms per save (3 saves; median step 100.0 ms)" "$async_line"; do
  grep -qxF "$want" <<<"$out" || { echo "FAIL: no line '$want'"; exit 1; }
done
# A run with no save followed by two steps: an error that names the file, not a figure.
status=0
err=$(python3 "$script" "$dir/short.jsonl" "$dir/sync.jsonl" 10 2>&1) || status=$?
[[ $status -ne 0 ]] && grep -qF "short.jsonl: too few steps around saves every 10" <<<"$err" ||
  { echo "FAIL: a run too short to measure: exit $status, '$err'"; exit 1; }
echo "ok: save_stall.py"
