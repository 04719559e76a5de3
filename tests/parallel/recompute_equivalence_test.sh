#!/usr/bin/env bash
# Activation recomputation (model.recompute) must not change training at all: the same
# deterministic ops on the same inputs, so every step's loss and grad norm, every validation loss
# and the exported weights are BIT-IDENTICAL to the run without it on the same layout
# (tests/checkpoint/compare_resumed.py). usage: recompute_equivalence_test.sh gpt2|llama
#
# The tiny config with 8 layers is trained 8 steps with recompute none, full, selective and full
# with recompute_num_layers=1 (the first layer of each model chunk recomputed, the rest kept) by
# one process and under mpirun on TP2 + sequence parallelism (the norm outputs gathered again in
# backward), PP2 × v2 interleaved (several slots and chunks sharing one recomputed set per chunk)
# and DP2 with the distributed optimizer; TP2 + SP also in bf16. Then `lattice validate` must
# report fewer activation bytes for selective than none, and fewer for full than selective.
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1  # several ranks per core
arch=$1
prepare_tiny_dataset

common=(train --config configs/test-tiny-$arch.json --set model.num_layers=8 --set data.path="$WORK/tiny"
        --set training.train_iters=8 --set training.global_batch_size=8 --set training.micro_batch_size=2
        --set training.eval_interval=4 --set training.eval_iters=2)
declare -A MODES=(
  [none]="--set model.recompute=none"
  [full]="--set model.recompute=full"
  [selective]="--set model.recompute=selective"
  [full1]="--set model.recompute=full --set model.recompute_num_layers=1"
)
# name -> "ranks precision overrides..."
declare -A LAYOUTS=(
  [one]="1 fp32"
  [tp2sp]="2 fp32 --set parallel.tensor=2 --set parallel.sequence_parallel=true"
  [pp2v2]="2 fp32 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved"
  [dp2do]="2 fp32 --set parallel.data=2 --set parallel.distributed_optimizer=true"
  [tp2sp_bf16]="2 bf16 --set parallel.tensor=2 --set parallel.sequence_parallel=true"
)

for layout in one tp2sp pp2v2 dp2do tp2sp_bf16; do
  read -r np precision overrides <<<"${LAYOUTS[$layout]}"
  modes=(none full selective full1)
  [[ $precision == bf16 ]] && modes=(none full selective)
  for mode in "${modes[@]}"; do
    run=$WORK/$layout-$mode
    # shellcheck disable=SC2086  # the overrides are words
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$np" $LATTICE "${common[@]}" $overrides \
      ${MODES[$mode]} --set training.precision=$precision --set logging.metrics_file="$run.jsonl" --export "$run" \
      >"$run.log" 2>&1 </dev/null || { echo "FAIL: $arch $layout $mode (mpirun -np $np):"; tail -20 "$run.log"; exit 1; }
    [[ $mode == none ]] && continue
    python3 tests/checkpoint/compare_resumed.py "$WORK/$layout-none.jsonl" "$run.jsonl" "$WORK/$layout-none" "$run" \
      | sed "s|$WORK/||"
  done
done

# Recomputation is not part of the model a checkpoint holds: a run saved at step 4 without it
# resumes with full recomputation (and the other way round), bitwise the uninterrupted run.
for pair in none:full full:none; do
  first=${pair%:*} second=${pair#*:}
  d=$WORK/resume-$first-$second
  ckpt=(--set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl")
  timeout 120 $LATTICE "${common[@]}" ${MODES[$first]} "${ckpt[@]}" --set training.exit_interval=4 >"$d-1.log" 2>&1 ||
    fail "$pair: first job: $(tail -3 "$d-1.log")"
  timeout 120 $LATTICE "${common[@]}" ${MODES[$second]} "${ckpt[@]}" --export "$d" >"$d-2.log" 2>&1 ||
    fail "$pair: resumed job: $(tail -3 "$d-2.log")"
  grep -q "resumed from $d/ckpt/iter_0000004: step 4" "$d-2.log" || fail "$pair: did not resume"
  python3 tests/checkpoint/compare_resumed.py "$WORK/one-none.jsonl" "$d.jsonl" "$WORK/one-none" "$d" | sed "s|$WORK/||"
done

# The activation estimate shrinks with recomputation.
bytes() {
  $LATTICE validate --json --config configs/test-tiny-$arch.json --set model.num_layers=8 --set data.path="$WORK/tiny" \
    --set model.recompute="$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["memory_bytes"]["activations"])'
}
none=$(bytes none) selective=$(bytes selective) full=$(bytes full)
echo "validate: activations none $none B, selective $selective B, full $full B"
(( full < selective && selective < none )) || fail "activation bytes do not shrink with recompute"
echo "ok: $arch recompute equivalence"
