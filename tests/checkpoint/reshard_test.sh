#!/usr/bin/env bash
# Resharding on resume: a checkpoint written by one layout continues on another within the parallel
# equivalence tolerance. usage: reshard_test.sh gpt2|llama
#
# The model and run of tests/parallel/layout_equivalence_test.sh (tiny config with 8 layers, global
# batch 8 of micro-batch 1, validation at steps 10 and 20; Llama with 8 heads / 4 kv heads) is
# trained 20 steps by one process (the reference, plus the one-process regroupings that measure its
# own rounding noise). Each pair FROM>TO trains steps 1..10 on FROM (training.exit_interval = 10
# saves and stops), then resumes on TO (checkpoint.load auto) for steps 11..20 — weights, AdamW
# moments (flat layout, whatever the sharding or the distributed optimizer), optimizer step, data
# position — appending to the same metrics file. compare_dp_runs.py then checks every step's loss
# and grad norm, both validation losses and the exported parameters against the reference, exactly
# as the equivalence tests check a layout. PRECISION=bf16 (the env of the bf16 target): every run in
# bf16 mixed precision, checkpoints holding the fp32 master weights and moments; the one-process fp32
# run joins the regroupings and compare_dp_runs.py --bf16 compares, as the bf16 equivalence tests do.
source tests/checkpoint/resume_lib.sh
arch=$1

# name -> "ranks overrides..."
declare -A LAYOUTS=(
  [one]="1"
  [tp2pp2dp2]="8 --set parallel.tensor=2 --set parallel.sequence_parallel=true --set parallel.pipeline=2 --set parallel.distributed_optimizer=true"
  [tp4]="4 --set parallel.tensor=4"
  [pp4]="4 --set parallel.pipeline=4"
  [dp4do]="4 --set parallel.distributed_optimizer=true"
  [dp2]="2 --set parallel.data=2"
  [pp2v2]="2 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved"
  [pp2]="2 --set parallel.pipeline=2"
)
PAIRS=(tp2pp2dp2:one tp4:pp4 dp4do:dp2 pp2v2:pp2 one:tp2pp2dp2)

model=(--config configs/test-tiny-$arch.json --set model.num_layers=8)
[[ $arch == llama ]] && model+=(--set model.num_attention_heads=8 --set model.num_kv_heads=4)
common=(train "${model[@]}" --set data.path="$WORK/tiny" --set training.train_iters=20
        --set training.global_batch_size=8 --set training.micro_batch_size=1
        --set training.eval_interval=10 --set training.eval_iters=2 --set training.precision=${PRECISION:-fp32})

run 1 "$WORK/ref.log" "${common[@]}" --set logging.metrics_file="$WORK/ref.jsonl" --export "$WORK/ref"
noise=()
for mb in 2 4 8; do
  run 1 "$WORK/mb$mb.log" "${common[@]}" --set training.micro_batch_size=$mb \
    --set logging.metrics_file="$WORK/mb$mb.jsonl" --export "$WORK/mb$mb"
  noise+=(--noise "$WORK/mb$mb.jsonl" "$WORK/mb$mb")
done
compare=(python3 tests/parallel/compare_dp_runs.py)
if [[ ${PRECISION:-fp32} == bf16 ]]; then  # as tests/parallel/layout_equivalence_test.sh does
  run 1 "$WORK/fp32.log" "${common[@]}" --set training.precision=fp32 --set logging.metrics_file="$WORK/fp32.jsonl" \
    --export "$WORK/fp32"
  noise+=(--noise "$WORK/fp32.jsonl" "$WORK/fp32")
  compare+=(--bf16)
fi

runs=()
for pair in "${PAIRS[@]}"; do
  from=${pair%:*} to=${pair#*:}
  d=$WORK/$from-$to
  ckpt=(--set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl")
  read -r np overrides <<<"${LAYOUTS[$from]}"
  # shellcheck disable=SC2086  # the overrides are words
  run "$np" "$d-from.log" "${common[@]}" $overrides "${ckpt[@]}" --set training.exit_interval=10
  [[ $(cat "$d/ckpt/latest") == iter_0000010 ]] || fail "$pair: no checkpoint at step 10"
  read -r np overrides <<<"${LAYOUTS[$to]}"
  # shellcheck disable=SC2086
  run "$np" "$d-to.log" "${common[@]}" $overrides "${ckpt[@]}" --export "$d"
  grep -m1 -o "resumed from .*" "$d-to.log" | sed "s|$WORK/||; s/^/$pair: /"
  grep -q "resumed from $d/ckpt/iter_0000010: step 10" "$d-to.log" || fail "$pair: did not resume"
  runs+=("$d.jsonl" "$d")
done
"${compare[@]}" 20 "$WORK/ref.jsonl" "$WORK/ref" "${noise[@]}" "${runs[@]}"
echo PASS
