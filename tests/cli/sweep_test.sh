#!/usr/bin/env bash
# tools/sweep.sh end to end on the tiny GPT-2 (6 steps a point, a checkpoint every 3): a point stopped
# early (training.exit_interval) and resumed by the full sweep; a 4-point learning-rate sweep with one
# point whose checkpoint folder is blocked by a file (fails), run twice — the second run starts none of
# the finished points — and `lattice report` against the metrics files; a point the config refuses;
# the --slurm job array's generated script run by hand for one task id; and a sweep stopped by SIGTERM. There is no Slurm here:
# sbatch and srun are stand-ins on PATH (sbatch records its arguments; srun drops its options and runs
# the command), so what is tested is the array script and the per-task path through
# tools/slurm/lattice.sbatch, not Slurm itself.
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
export LATTICE
prepare_tiny_dataset

sw=$WORK/sweep
rm -rf "$sw"
sweep() {  # sweep ARGS... [-- lattice train args]: the tiny config, 6 steps, checkpoints every 3 steps
  timeout 300 tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$sw" --save-interval 3 "$@"
}
common=(--set data.path="$WORK/tiny" --set training.train_iters=6 --set training.eval_interval=3
        --set training.eval_iters=2 --set logging.peak_gflops=1000)
grid=(--grid 'optimizer.lr=1e-3,2e-3,3e-3,4e-3')

# Point lr=2e-3 alone, stopped after step 3 (with its checkpoint): exit 1, status stopped.
rc=0
sweep --grid optimizer.lr=2e-3 -- "${common[@]}" --set training.exit_interval=3 >"$WORK/s0.txt" 2>&1 || rc=$?
cat "$WORK/s0.txt"
[[ $rc -eq 1 ]] || fail "a sweep with a stopped point exited $rc, expected 1"
grep -q "optimizer.lr=2e-3: stopped" "$WORK/s0.txt" || fail "no 'stopped' for the stopped point"
[[ -d $sw/optimizer.lr=2e-3/checkpoints/iter_0000003 ]] || fail "the stopped point saved no checkpoint at step 3"

# The full sweep; lr=4e-3's checkpoint folder is taken by a file, so that point fails (exit 2 from lattice).
mkdir -p "$sw/optimizer.lr=4e-3" && touch "$sw/optimizer.lr=4e-3/checkpoints"
rc=0
sweep "${grid[@]}" -- "${common[@]}" >"$WORK/s1.txt" 2>&1 || rc=$?
cat "$WORK/s1.txt"
[[ $rc -eq 1 ]] || fail "first sweep exited $rc, expected 1 (one point failed)"
for lr in 1e-3 2e-3 3e-3; do grep -q "optimizer.lr=$lr: finished" "$WORK/s1.txt" || fail "lr=$lr did not finish"; done
grep -q "optimizer.lr=2e-3 (was stopped" "$WORK/s1.txt" || fail "the stopped point was not announced as resuming"
grep -q "optimizer.lr=4e-3: failed (exit 2): checkpoint.dir .* is not writable" "$WORK/s1.txt" ||
  fail "the failed point's line does not say why"
# The resumed point: a second run_start that resumed from step 3, and steps 4..6 only once each.
python3 - "$sw/optimizer.lr=2e-3/metrics.jsonl" <<'PY' || fail "lr=2e-3 did not resume from its checkpoint"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
starts = [l["run_start"]["resumed_from_step"] for l in lines if "run_start" in l]
steps = [l["step"] for l in lines if "loss" in l]
assert starts == [0, 3], starts
assert steps == [1, 2, 3, 4, 5, 6], steps
PY
# The summary table at the end lists the four points.
[[ $(grep -cE "^$sw/optimizer.lr=[1-4]e-3 " "$WORK/s1.txt") -eq 4 ]] || fail "the summary does not list the 4 points"

# Second run: nothing finished starts again (skip lines; metrics files byte-identical, mtimes kept).
stamp() { for d in "$sw"/optimizer.lr=[123]e-3; do md5sum "$d/metrics.jsonl"; stat -c '%n %Y' "$d/metrics.jsonl" "$d/log.txt"; done; }
stamp >"$WORK/before.txt"
sleep 1
rc=0
sweep "${grid[@]}" -- "${common[@]}" >"$WORK/s2.txt" 2>&1 || rc=$?
cat "$WORK/s2.txt"
[[ $rc -eq 1 ]] || fail "second sweep exited $rc, expected 1"
for lr in 1e-3 2e-3 3e-3; do grep -q "skip optimizer.lr=$lr (finished)" "$WORK/s2.txt" || fail "lr=$lr not skipped"; done
[[ $(grep -c "\] run " "$WORK/s2.txt") -eq 1 ]] || fail "the second sweep ran more than the failed point"
stamp | diff "$WORK/before.txt" - || fail "a finished point's files changed on the second run"

runs=("$sw/optimizer.lr=1e-3" "$sw/optimizer.lr=2e-3" "$sw/optimizer.lr=3e-3" "$sw/optimizer.lr=4e-3")
$LATTICE report "${runs[@]}" >"$WORK/report.txt" 2>/dev/null || fail "report"
$LATTICE report --csv "${runs[@]}" >"$WORK/report.csv" 2>/dev/null || fail "report --csv"
python3 tests/cli/verify_run_report.py "$WORK/report.txt" "$WORK/report.csv" optimizer.lr \
  "${runs[0]}=finished" "${runs[1]}=finished" "${runs[2]}=finished" "${runs[3]}=failed"

# A point the config refuses never gets a run folder: the sweep names it and the error.
rc=0
timeout 60 tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$WORK/refused" --grid optimizer.lr=-1 \
  -- "${common[@]}" >"$WORK/s3.txt" 2>&1 || rc=$?
cat "$WORK/s3.txt"
[[ $rc -eq 1 ]] || fail "a refused point: exit $rc, expected 1"
grep -q "optimizer.lr=-1: no run folder .*optimizer.lr must be >= 0" "$WORK/s3.txt" || fail "refused point not explained"

# Usage errors: exit 2.
rc=0
tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$WORK/u" --grid optimizer.lr >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--grid without values: exit $rc, expected 2"
# An output path after -- would be every point's: refused (exit 2) before any point runs.
rc=0
out=$(tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$WORK/u2" --grid optimizer.lr=1e-3,2e-3 -- \
  "${common[@]}" --set checkpoint.dir="$WORK/shared_ck" 2>&1) || rc=$?
[[ $rc -eq 2 ]] && grep -qF "'checkpoint.dir=$WORK/shared_ck' after -- would be shared by every point" <<<"$out" ||
  fail "a shared checkpoint.dir after --: exit $rc: $out"
[[ ! -e $WORK/shared_ck && ! -e $WORK/u2/optimizer.lr=1e-3 ]] || fail "a refused sweep ran a point"
# The first sweep of $sw ran with other arguments after -- (exit_interval 3): said when run again.
grep -q "sweep: warning: '$sw' was swept before with other shared arguments" "$WORK/s1.txt" ||
  fail "no warning that the sweep's shared arguments changed"

# --slurm: a points file (with a comment) of 3 points, one already finished, submitted through a
# stand-in sbatch; then the generated array script run by hand as task 2.
stand_ins=$WORK/bin
mkdir -p "$stand_ins"
printf '#!/bin/sh\necho "$@" >"%s/sbatch.args"\n' "$WORK" >"$stand_ins/sbatch"
# shellcheck disable=SC2016  # the stand-in's own $1 and $@
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done\nexec "$@"\n' >"$stand_ins/srun"
chmod +x "$stand_ins/sbatch" "$stand_ins/srun"
cat >"$WORK/points.txt" <<'P'
# seeds at lr 1e-3
optimizer.lr=1e-3 training.seed=1
optimizer.lr=1e-3 training.seed=2   # the one run by hand below

optimizer.lr=1e-3 training.seed=3
P
sl=$WORK/slurm-sweep
mkdir -p "$sl"
cp -r "$sw/optimizer.lr=1e-3" "$sl/optimizer.lr=1e-3,training.seed=1"  # counts as finished
PATH=$stand_ins:$PATH timeout 60 tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$sl" \
  --points "$WORK/points.txt" --save-interval 3 --slurm --ntasks=1 --time=10 -- "${common[@]}" >"$WORK/s4.txt" 2>&1 ||
  { cat "$WORK/s4.txt"; fail "--slurm"; }
cat "$WORK/s4.txt" "$sl/.sweep/array.sbatch"
[[ $(cat "$WORK/sbatch.args") == "--array=1,2 --ntasks=1 --time=10 $sl/.sweep/array.sbatch" ]] ||
  fail "sbatch got '$(cat "$WORK/sbatch.args")'"
grep -q '^#SBATCH --signal=B:USR1@120$' "$sl/.sweep/array.sbatch" || fail "array script without the stop signal"
# Array tasks start together and read points.txt: a task must not rewrite it under the others.
points_stamp=$(stat -c '%i %y' "$sl/.sweep/points.txt")
(cd / && SLURM_ARRAY_TASK_ID=1 SLURM_JOB_ID=41 SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=1 PATH=$stand_ins:$PATH \
  timeout 120 "$sl/.sweep/array.sbatch") >"$WORK/task1.txt" 2>&1 || { cat "$WORK/task1.txt"; fail "array task 1"; }
grep -q "lattice: job 41 restart 0" "$WORK/task1.txt" || fail "task 1 did not go through tools/slurm/lattice.sbatch"
point=$sl/optimizer.lr=1e-3,training.seed=2
$LATTICE report --csv "$point" 2>/dev/null | grep -q ",finished,6," || fail "array task 1 did not finish its point"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['training']['seed']==2 and c['checkpoint']['save_interval']==3, c" \
  "$point/config.json" || fail "task 1 ran the wrong point"
[[ ! -e $sl/optimizer.lr=1e-3,training.seed=3 ]] || fail "task 1 ran another point too"
[[ $(stat -c '%i %y' "$sl/.sweep/points.txt") == "$points_stamp" ]] ||
  fail "array task 1 rewrote .sweep/points.txt, which the array's other tasks read as they start"
# Task 0 (finished) starts nothing.
(cd / && SLURM_ARRAY_TASK_ID=0 PATH=$stand_ins:$PATH "$sl/.sweep/array.sbatch") | grep -q "skip optimizer.lr=1e-3,training.seed=1 (finished)" ||
  fail "array task 0 did not skip its finished point"

# A sweep stopped by a signal: the running point saves and stops, the next one is never started, and
# the summary says so and how to go on (not "refused before it wrote one" with an empty reason).
sig=$WORK/sig
rm -rf "$sig"
rc=0
tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$sig" --grid 'optimizer.lr=1e-3,2e-3' -- "${common[@]}" \
  --set training.train_iters=1000000 >"$WORK/s_sig.txt" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qs '"loss"' "$sig/optimizer.lr=1e-3/metrics.jsonl" && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid" || rc=$?
cat "$WORK/s_sig.txt"
[[ $rc -ne 0 ]] || fail "a stopped sweep exited 0"
grep -q "optimizer.lr=1e-3: stopped" "$WORK/s_sig.txt" || fail "the running point is not reported stopped"
grep -q "sweep: optimizer.lr=2e-3: not started (the sweep was stopped first); run the sweep again to train it" \
  "$WORK/s_sig.txt" || fail "the point never started is not reported as such"
echo "ok: sweeps"
