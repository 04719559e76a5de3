#!/usr/bin/env bash
# `lattice plan` against measured steps on this machine. The `cpu` figures are calibrated the way the
# README tells a user to: `lattice bench` (one process, GPT-2 124M's shape with 64-token sequences)
# gives the sgemm peak, the share of it the forward + backward reach and the optimizer's memory
# bandwidth; `mpirun -np 2 lattice bench --comm` gives α and β. With that FILE, the plan's own rows
# for six layouts of one and two processes (1, TP2, PP2 1f1b, PP2 interleaved, DP2, DP2 with the
# distributed optimizer) are trained with the `--set` strings the plan prints, and each predicted
# step time is set beside the measured one (median of the steps after the first). The one-process
# layout is the calibration's own shape: its agreement shows the noise; the five two-process ones are
# predictions. Medians on both sides: this VM now and then stalls one step many times over. A layout
# out of bounds is trained once more and the faster of its two medians counts (see check below).
#
# Bounds (BOUNDS):
#   tight (default): each prediction within 25% of its measured step, and the layout predicted
#     fastest measures within 10% of the fastest; the figures the README reports.
#   gross: each prediction within 50% of its measured step, no ranking; what
#     tests/plan:plan_measured_test asserts. On a shared 2-core VM a two-process layout's median
#     step moves by 20-30% from run to run (dp2: 3.47 s, then 4.99 s, against the same prediction
#     within 1%), so the tight bounds are a benchmark's verdict, not a test's. 50% catches a
#     calibration figure misread or the dominant cost counted twice; finer errors of the model are
#     caught where nothing is timed (the layers' TP split left out measured tp2 +28% here, within
#     50%, and fails 9 rows of tests/plan:plan_published_test).
# Usage: tools/bench_plan.sh [STEPS=4]; WORK (default runs/bench_plan), LATTICE, BOUNDS.
# Run it on an otherwise idle machine: it times steps. Exit 1 when a bound is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-4}
WORK=${WORK:-runs/bench_plan}
LATTICE=${LATTICE:-bazel-bin/trainer/lattice}
BOUNDS=${BOUNDS:-tight}
TEXT=/usr/share/games/fortunes
[[ $BOUNDS == tight || $BOUNDS == gross ]] || { echo "BOUNDS must be tight or gross, not '$BOUNDS'"; exit 2; }
[[ $STEPS -ge 2 ]] || { echo "STEPS must be at least 2 (the first step is not timed)"; exit 2; }
mkdir -p "$WORK"
[[ -x $LATTICE ]] || tools/build.sh
[[ -d $TEXT ]] || { echo "$TEXT missing: run tools/install_deps.sh"; exit 2; }
fail() { echo "FAIL: $*"; exit 1; }
[[ -f $WORK/tiny.idx ]] || "$LATTICE" data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" \
  --output-prefix "$WORK/tiny" --text-document-separator percent-line >/dev/null 2>&1
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
shape=(--config configs/gpt2-124m.json --set data.path="$WORK/tiny" --set model.seq_length=64
       --set training.micro_batch_size=1 --set training.global_batch_size=8)

# ---- calibration ----
timeout 300 "$LATTICE" bench "${shape[@]}" --steps 5 >"$WORK/bench.txt" 2>"$WORK/bench.log" ||
  { cat "$WORK/bench.log"; fail "lattice bench"; }
timeout 120 mpirun --oversubscribe -np 2 "$LATTICE" bench --comm >"$WORK/comm.txt" 2>&1 ||
  { cat "$WORK/comm.txt"; fail "lattice bench --comm"; }
grep -E "peak|forward|optimizer step|plan --gpu" "$WORK/bench.txt"
grep -E "α|plan --gpu" "$WORK/comm.txt"
efficiency=$(python3 - "$WORK" <<'PY'
import json, re, sys
work = sys.argv[1]
def spec_line(path):
    line = next(l for l in open(path) if "for lattice plan --gpu FILE" in l)
    return line.split(":", 1)[1].split(";")[0].strip()
bench, comm = spec_line(f"{work}/bench.txt"), spec_line(f"{work}/comm.txt")
spec = json.loads("{" + bench + ", " + comm + "}")
spec["name"] = "this-machine"
json.dump(spec, open(f"{work}/cpu.json", "w"), indent=1)
print(re.search(r"--gemm-efficiency ([0-9.]+)", open(f"{work}/bench.txt").read()).group(1))
PY
) || fail "no calibration lines in the bench outputs"
echo "calibrated spec ($WORK/cpu.json): $(tr -d '\n' <"$WORK/cpu.json"), --gemm-efficiency $efficiency"

# ---- the plan's rows ----
for gpus in 1 2; do
  "$LATTICE" plan "${shape[@]}" --gpus "$gpus" --gpus-per-node 2 --gpu "$WORK/cpu.json" --gemm-efficiency "$efficiency" \
    --json --top 0 >"$WORK/plan$gpus.json" 2>"$WORK/plan$gpus.log" || { cat "$WORK/plan$gpus.log"; fail "plan --gpus $gpus"; }
done
# One row per layout: micro-batch 1, no recompute or sequence parallelism (what the runs below train).
python3 - "$WORK" <<'PY' || fail "the plan lacks a layout"
import json, sys
work = sys.argv[1]
rows = json.load(open(f"{work}/plan1.json")) + json.load(open(f"{work}/plan2.json"))
wanted = {"one": (1, 1, 1, 1, False), "tp2": (2, 1, 1, 1, False), "pp2_1f1b": (1, 2, 1, 1, False),
          "pp2_interleaved": (1, 2, 1, 2, False), "dp2": (1, 1, 2, 1, False), "dp2_distributed_opt": (1, 1, 2, 1, True)}
picked = {}
for name, key in wanted.items():
    match = [r for r in rows if (r["tensor"], r["pipeline"], r["data"], r["virtual_stages"], r["distributed_optimizer"]) == key
             and r["micro_batch_size"] == 1 and r["recompute"] == "none" and not r["sequence_parallel"]]
    if len(match) != 1:
        sys.exit(f"{name}: {len(match)} rows of the plan")
    picked[name] = match[0]
json.dump(picked, open(f"{work}/picked.json", "w"))
for name, r in picked.items():
    print(name, r["tensor"] * r["pipeline"] * r["data"], " ".join("--set " + s for s in r["set"]), file=open(f"{work}/{name}.cmd", "w"))
PY

# ---- the measured steps ----
measure() {  # measure NAME: train the layout's row for $STEPS steps into $WORK/NAME.jsonl
  local name=$1 np sets
  read -r _ np sets <"$WORK/$name.cmd"
  rm -f "$WORK/$name.jsonl"
  # shellcheck disable=SC2206  # the plan's --set strings contain no spaces
  local cmd=("$LATTICE" train "${shape[@]}" $sets --set training.train_iters="$STEPS" --set optimizer.warmup_iters=1
             --set training.eval_interval=0 --set logging.log_interval=1 --set logging.metrics_file="$WORK/$name.jsonl")
  [[ $np -gt 1 ]] && cmd=(mpirun --oversubscribe -np "$np" "${cmd[@]}")
  timeout 300 "${cmd[@]}" >"$WORK/$name.log" 2>&1 </dev/null || { tail -20 "$WORK/$name.log"; fail "$name: the run failed"; }
}
for name in one tp2 pp2_1f1b pp2_interleaved dp2 dp2_distributed_opt; do
  measure "$name"
done
# check PASS (first|final): the table and the bounds. A layout that misses them on the first pass is
# trained once more and the faster of its two medians counts: on a shared VM a neighbour only ever
# slows a step (tp2, which waits on both cores every layer, measured 5.42 s against one process's
# 5.70 s in one CI run, -50.3%), while an error of the model repeats in both runs.
check() {
python3 - "$WORK" "$BOUNDS" "$STEPS" "$1" <<'PY'
import json, os, sys
work, bounds, steps, final = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "final"
picked = json.load(open(f"{work}/picked.json"))
def median_step(path):
    rows = [json.loads(l) for l in open(path) if '"step_ms"' in l]
    if len(rows) != steps:
        sys.exit(f"{path}: {len(rows)} steps in the metrics file, not {steps}")
    timed = sorted(r["step_ms"] / 1e3 for r in rows[1:])  # the first step warms up
    return timed[len(timed) // 2]
measured = {}
for name in picked:
    tries = [f"{work}/{name}.try1.jsonl", f"{work}/{name}.jsonl"]
    measured[name] = min(median_step(p) for p in tries if os.path.exists(p))
def within(err):  # err = predicted / measured - 1
    return abs(err) <= (0.25 if bounds == "tight" else 0.50)
missed = []  # the layouts to remeasure; the bounds are met when it stays empty
print(f"{'layout':<20} {'ranks':>5} {'predicted s':>11} {'measured s':>10} {'error':>7}   (predicted: compute, bubble, dp, optimizer)")
for name, r in picked.items():
    err = r["step_s"] / measured[name] - 1
    if not within(err):
        missed.append(name)
    print(f"{name:<20} {r['tensor'] * r['pipeline'] * r['data']:>5} {r['step_s']:>11.3f} {measured[name]:>10.3f} {100 * err:>+6.1f}%"
          f"   ({r['compute_s']:.3f}, {r['bubble_s']:.3f}, {r['dp_exposed_s']:.3f}, {r['optimizer_s']:.3f})"
          f"{'' if within(err) else '  <- out of bounds'}")
best_predicted = min(picked, key=lambda n: picked[n]["step_s"])
best_measured = min(measured, key=measured.get)
gap = measured[best_predicted] / measured[best_measured] - 1
print(f"fastest predicted: {best_predicted} (measured {measured[best_predicted]:.3f} s); fastest measured: "
      f"{best_measured} ({measured[best_measured]:.3f} s): {100 * gap:+.1f}%"
      f"{' (bound 10%)' if bounds == 'tight' else ''}")
if bounds == "tight" and gap > 0.10 and best_predicted not in missed:
    missed.append(best_predicted)
ok = not missed
if bounds == "tight":
    print("bounds: each within 25% of measured, the predicted fastest within 10% of the fastest:", "met" if ok else "missed")
else:
    print("bounds: each within 50% of measured:", "met" if ok else "missed")
open(f"{work}/missed", "w").write(" ".join(missed))
if not ok and not final:
    print("remeasuring once:", " ".join(missed))
sys.exit(0 if ok else 1)
PY
}
rm -f "$WORK"/*.try1.jsonl "$WORK/missed"
if ! check first; then
  [[ -s $WORK/missed ]] || fail "the check failed before comparing (see above)"
  for name in $(cat "$WORK/missed"); do
    mv "$WORK/$name.jsonl" "$WORK/$name.try1.jsonl"
    measure "$name"
  done
  check final || fail "the plan does not predict this machine (BOUNDS=$BOUNDS)"
fi
