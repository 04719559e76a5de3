#!/usr/bin/env bash
# Same-layout resume is bitwise: for each layout, the tiny GPT-2 trained 20 steps in one job
# (validation every 5) against the same run split into two jobs — the first stops after step 10
# (training.exit_interval = 10: a deterministic stop that keeps train_iters, and so the LR schedule,
# unchanged), saving every 5 steps; the second resumes from checkpoint.dir/latest (checkpoint.load
# auto) and trains steps 11..20. Losses, grad norms, LRs and validation losses of every step and the
# exported parameters must be bit-identical (compare_resumed.py). Layouts: one process (async
# saves, keep_last 2), TP2×PP2 (4 ranks), DP2 with the distributed optimizer and overlapped
# parameter gathers (synchronous saves), PP2×v2×DP2 interleaved with the distributed optimizer.
# Then the export: `lattice export --checkpoint` of the TP2×PP2 run's final checkpoint equals its
# own gathered --export byte for byte, and the one-process model within the parallel equivalence
# tolerance (tests/parallel/compare_dp_runs.py). Last, keep_last with a `latest` that is not the
# newest checkpoint (see below).
source tests/checkpoint/resume_lib.sh

declare -A LAYOUTS=(
  [one]="1 --set checkpoint.keep_last=2"
  [tp2pp2]="4 --set parallel.tensor=2 --set parallel.pipeline=2"
  [dp2do]="2 --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true --set checkpoint.async=false"
  [pp2v2dp2do]="4 --set model.num_layers=4 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set training.micro_batch_size=1 --set parallel.distributed_optimizer=true"
)
common=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20
        --set training.eval_interval=5 --set training.eval_iters=2)

for name in one tp2pp2 dp2do pp2v2dp2do; do
  read -r np overrides <<<"${LAYOUTS[$name]}"
  d=$WORK/$name
  # shellcheck disable=SC2086  # the overrides are words
  run "$np" "$d-full.log" "${common[@]}" $overrides --set logging.metrics_file="$d-full.jsonl" --export "$d-full"
  ckpt=(--set checkpoint.dir="$d/ckpt" --set checkpoint.save_interval=5 --set logging.metrics_file="$d-split.jsonl")
  # shellcheck disable=SC2086
  run "$np" "$d-job1.log" "${common[@]}" $overrides "${ckpt[@]}" --set training.exit_interval=10
  grep -q "stopped by training.exit_interval (10) after step 10; checkpoint iter_0000010 saved" "$d-job1.log" ||
    fail "$name: job 1 did not report its stop: $(tail -3 "$d-job1.log")"
  [[ $(cat "$d/ckpt/latest") == iter_0000010 ]] || fail "$name: latest is $(cat "$d/ckpt/latest")"
  # shellcheck disable=SC2086
  run "$np" "$d-job2.log" "${common[@]}" $overrides "${ckpt[@]}" --export "$d-split"
  grep -q "resumed from $d/ckpt/iter_0000010: step 10, .* written by $np rank(s)" "$d-job2.log" ||
    fail "$name: job 2 did not log what it loaded: $(grep -m3 -E 'resum|checkpoint' "$d-job2.log")"
  python3 tests/checkpoint/compare_resumed.py "$d-full.jsonl" "$d-split.jsonl" "$d-full" "$d-split"
done

# keep_last 2 kept the two newest; latest names the last.
[[ $(cd "$WORK/one/ckpt" && echo iter_*) == "iter_0000015 iter_0000020" ]] || fail "keep_last 2 left $(ls "$WORK/one/ckpt")"
[[ $(cat "$WORK/one/ckpt/latest") == iter_0000020 ]] || fail "latest is not iter_0000020"

# keep_last never retires what `latest` names, also when that is not the newest checkpoint: job 1
# saves iter_5..20; `latest` is set back to iter_10; job 2 resumes there with keep_last 1, saves
# iter_15 and stops (exit_interval 15), retiring the older ones; `latest` must name iter_15 and it
# must exist, so that job 3 resumes from it and completes.
k=$WORK/keep
run 1 "$k-job1.log" "${common[@]}" --set checkpoint.dir="$k" --set checkpoint.save_interval=5
echo iter_0000010 >"$k/latest"
run 1 "$k-job2.log" "${common[@]}" --set checkpoint.dir="$k" --set checkpoint.save_interval=5 \
  --set checkpoint.keep_last=1 --set training.exit_interval=15
grep -q "resumed from $k/iter_0000010: step 10" "$k-job2.log" || fail "keep_last: job 2 did not resume from iter_10"
[[ $(cat "$k/latest") == iter_0000015 && -d $k/iter_0000015 ]] ||
  fail "keep_last 1 retired the checkpoint latest names: latest $(cat "$k/latest"), left $(ls "$k")"
[[ ! -e $k/iter_0000005 && ! -e $k/iter_0000010 ]] || fail "keep_last 1 kept older checkpoints: $(ls "$k")"
run 1 "$k-job3.log" "${common[@]}" --set checkpoint.dir="$k" --set checkpoint.keep_last=1
grep -q "resumed from $k/iter_0000015: step 15" "$k-job3.log" || fail "keep_last: job 3 did not resume from iter_15"
[[ $(cat "$k/latest") == iter_0000020 ]] || fail "keep_last: job 3 ended with latest $(cat "$k/latest")"

# Export from the TP2×PP2 checkpoint.
$LATTICE export --checkpoint "$WORK/tp2pp2/ckpt" --format hf --output "$WORK/tp2pp2-ckpt-export" >/dev/null 2>&1 ||
  fail "lattice export --checkpoint of the TP2×PP2 run"
cmp "$WORK/tp2pp2-ckpt-export/model.safetensors" "$WORK/tp2pp2-split/model.safetensors" ||
  fail "export --checkpoint differs from the run's own --export"
python3 tests/parallel/compare_dp_runs.py 20 "$WORK/one-full.jsonl" "$WORK/one-full" \
  "$WORK/tp2pp2-split.jsonl" "$WORK/tp2pp2-ckpt-export"
echo PASS
