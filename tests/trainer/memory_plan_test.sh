#!/usr/bin/env bash
# The memory plan (trainer/memory_plan.h) against what runs measure: GPT-2 124M's shape with short
# sequences, one process and TP2, PP2 (1f1b and interleaved), DP2 (with and without the distributed
# optimizer), TP2 + SP, full and selective recomputation, bf16, a checkpointing run, its resume, and
# PP2 from Hugging Face weights (model.init_from). For each
# run, on its largest rank: the allocations' high mark (every tensor's storage, counted by
# Storage::host) must be within 1% of the prediction — the plan mirrors the allocations item by
# item, so a missed buffer shows here — and the peak RSS within 10% of the plan plus the process's
# RSS before the run allocated anything (the program and its libraries: a --config=cuda binary maps
# about 150 MiB more of them). Also `lattice validate` prints the same plan for the layout given.
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset

base=(train --config configs/gpt2-124m.json --set data.path="$WORK/tiny" --set model.seq_length=64
      --set training.micro_batch_size=2 --set training.global_batch_size=8 --set training.train_iters=2
      --set optimizer.warmup_iters=1 --set training.eval_interval=0 --set logging.log_interval=1)
runs=0
# check NAME NP overrides...: trains, then compares the summary's predicted and measured peaks.
check() {
  local name=$1 np=$2
  shift 2
  local metrics=$WORK/$name.jsonl log=$WORK/$name.log
  local cmd=(timeout 300 $LATTICE "${base[@]}" "$@" --set logging.metrics_file="$metrics")
  [[ $np -gt 1 ]] && cmd=(timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" $LATTICE "${base[@]}" "$@"
                          --set logging.metrics_file="$metrics")
  "${cmd[@]}" >"$log" 2>&1 </dev/null || { tail -20 "$log"; fail "$name: the run failed"; }
  python3 - "$name" "$metrics" <<'PY' || { grep -E "memory|peak" "$log"; fail "$name: prediction off"; }
import json, sys
name, path = sys.argv[1], sys.argv[2]
s = [json.loads(l) for l in open(path) if '"summary"' in l][-1]["summary"]
p, ps = s["predicted_peak_bytes"], s["predicted_storage_bytes"]
a, r = s["peak_allocated_bytes"], s["peak_host_bytes"]
da, dr = 100 * (a / ps - 1), 100 * (r / p - 1)
print(f"{name:<34} tensors: predicted {ps / 2**20:7.1f} MiB, allocated {a / 2**20:7.1f} MiB ({da:+5.2f}%) | "
      f"peak: predicted {p / 2**20:7.1f} MiB, RSS {r / 2**20:7.1f} MiB ({dr:+5.1f}%)")
ok = abs(da) <= 1 and abs(dr) <= 10
if "dp2" in name and not ok:
    # The DP buckets' MPI temporaries exist only while their non-blocking reductions are in flight,
    # and how many overlap varies from run to run (dp2: 220 to 490 MiB of the predicted 472, with or
    # without the distributed optimizer, measured over runs): the RSS must then lie between the
    # prediction with half of them and all of them.
    base = s["start_host_bytes"]
    low = ps + base + (p - ps - base) / 2
    ok = abs(da) <= 1 and 0.9 * low <= r <= 1.1 * p
    print(f"{'':<34} (DP: RSS {r / 2**20:.1f} MiB within 10% of {low / 2**20:.1f}..{p / 2**20:.1f} MiB: {ok})")
sys.exit(0 if ok else 1)
PY
  runs=$((runs + 1))
}

check one 1
check tp2 2 --set parallel.tensor=2
check tp2_sp 2 --set parallel.tensor=2 --set parallel.sequence_parallel=true
check pp2_1f1b 2 --set parallel.pipeline=2
check pp2_interleaved 2 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved
check dp2 2 --set parallel.data=2
check dp2_distributed_opt 2 --set parallel.data=2 --set parallel.distributed_optimizer=true
check recompute_full 1 --set model.recompute=full
check recompute_selective 2 --set parallel.pipeline=2 --set model.recompute=selective
check bf16 1 --set training.precision=bf16
check bf16_dp2_distributed_opt 2 --set training.precision=bf16 --set parallel.data=2 \
  --set parallel.distributed_optimizer=true --set parallel.grad_reduce_dtype=bf16
check checkpointing_dp2_distributed_opt 2 --set parallel.data=2 --set parallel.distributed_optimizer=true \
  --set checkpoint.dir="$WORK/ckpt" --set checkpoint.save_interval=1
# A resume loads each rank's shard straight into its state, and model.init_from each rank's boxes one
# parameter at a time: neither may allocate past the plan (both once held the whole model's state or
# weights on every rank).
check resume_dp2_distributed_opt 2 --set parallel.data=2 --set parallel.distributed_optimizer=true \
  --set checkpoint.dir="$WORK/ckpt" --set checkpoint.save_interval=1 --set training.train_iters=3
grep -q "resumed from $WORK/ckpt/iter_0000002" "$WORK/resume_dp2_distributed_opt.log" || fail "resume: did not resume"
$LATTICE export --checkpoint "$WORK/ckpt" --format hf --output "$WORK/hf" >"$WORK/export.log" 2>&1 || fail "export"
check init_from_pp2 2 --set parallel.pipeline=2 --set model.init_from="$WORK/hf"
[[ $runs -ge 8 ]] || fail "only $runs runs"

# validate prints the plan for the layout it is given (not one process's memory). The tiny dataset's
# validation split holds no sample of 1024 tokens, which validate refuses as train would: no evaluation.
out=$($LATTICE validate --config configs/gpt2-124m.json --world-size 4 --set data.path="$WORK/tiny" --set parallel.pipeline=2 \
  --set parallel.tensor=2 --set training.eval_interval=0) || fail "validate"
grep -q "memory per rank (tensor 2 × pipeline 2 × data 1, fp32), largest: pipeline stage ." <<<"$out" ||
  fail "validate does not print the per-rank plan: $out"
grep -q "peak per pipeline stage:" <<<"$out" || fail "validate does not give each stage's peak"
# The distributed optimizer's bytes per parameter over dp 4, Megatron's figures: fp32 4 + 4 + 8/d (the
# fp32 weights are their own main shard), bf16 2 + 4 + 12/d.
for want in fp32:10 bf16:9; do
  out=$($LATTICE validate --config configs/gpt2-124m.json --world-size 4 --set data.path="$WORK/tiny" \
    --set parallel.data=4 --set parallel.distributed_optimizer=true --set training.eval_interval=0 \
    --set training.precision=${want%:*}) || fail "validate dp4 ${want%:*}"
  grep -q "distributed optimizer), largest: pipeline stage 0 (${want#*:}.0. bytes/parameter" <<<"$out" ||
    fail "validate dp4 ${want%:*} with the distributed optimizer: not ${want#*:} bytes/parameter: $out"
done
echo "PASS: $runs runs, allocations within 1% and RSS within 10% of the memory plan"
