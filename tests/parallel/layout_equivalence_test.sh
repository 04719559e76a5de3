#!/usr/bin/env bash
# The central correctness test: `lattice train` on a parallel layout trains the model one process
# would. usage: layout_equivalence_test.sh gpt2|llama LAYOUT...
#
# The tiny config (configs/test-tiny-ARCH.json) with 8 layers (PP4 × v2 = 8 virtual stages), global
# batch 8 of micro-batch 1 (interleaving needs micro-batches a multiple of PP) and, for Llama, 8
# heads / 4 kv heads (TP4), is trained 20 steps with validation at steps 10 and 20 by one process
# and by each LAYOUT under mpirun; compare_dp_runs.py checks every step's loss and grad norm, every
# validation loss (relative 1e-5) and the exported parameters (its docstring states the tolerance),
# each widened only where one process itself moves that much when its fp32 sums are regrouped
# (micro-batches of 2, 4, 8 instead of 1): the tiny Llama's step 16 gradient norm reacts to last-bit
# changes (one-process regroupings differ from each other by up to 2e-5 there); GPT-2 stays at 1e-5.
# Pipeline layouts must also print the measured bubble next to the theoretical one, data-parallel
# layouts the hidden share of their gradient communication (metrics "summary" line).
# PRECISION=bf16 (the env of the bf16 targets) trains everything, the reference and its regroupings
# included, in bf16 mixed precision; the one-process fp32 run joins the regroupings, and parameters
# are compared per tensor in L2 against a run-wide noise level (compare_dp_runs.py --bf16 says why).
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1  # several ranks per core
STEPS=20
arch=$1
shift

# name -> "ranks overrides..."
declare -A LAYOUTS=(
  [tp2]="2 --set parallel.tensor=2"
  [tp4]="4 --set parallel.tensor=4"
  [tp2sp]="2 --set parallel.tensor=2 --set parallel.sequence_parallel=true"
  [pp2]="2 --set parallel.pipeline=2"
  [pp4]="4 --set parallel.pipeline=4"
  [pp2v2]="2 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved"
  [pp4v2]="4 --set parallel.pipeline=4 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved"
  [pp2gpipe]="2 --set parallel.pipeline=2 --set parallel.schedule=gpipe"
  [pp2uneven]="2 --set parallel.pipeline=2 --set parallel.layers_per_stage=[3,5]"
  [dp2]="2 --set parallel.data=2"
  # The data-parallel gradient reduction in bf16 (each bucket rounded, reduced in bf16, widened back).
  [dp2bf16reduce]="2 --set parallel.data=2 --set parallel.grad_reduce_dtype=bf16"
  # overlap_param_gather: each step's forward waits for the previous step's parameter all-gathers
  # bucket by bucket, right before it reads them.
  [dp4do]="4 --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true"
  [pp2v2dp2do]="4 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set parallel.distributed_optimizer=true"
  # model.init_from under a sharded layout: every rank loads the HF file of the seeded init and copies
  # its boxes out of it, so training matches the seeded one-process run.
  [tp2pp2init]="4 --set parallel.tensor=2 --set parallel.pipeline=2 --set model.init_from=$WORK/init/model.safetensors"
  [tp2pp2dp2]="8 --set parallel.tensor=2 --set parallel.sequence_parallel=true --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true"
)

prepare_tiny_dataset

model=(--config configs/test-tiny-$arch.json --set model.num_layers=8)
[[ $arch == llama ]] && model+=(--set model.num_attention_heads=8 --set model.num_kv_heads=4)
common=(train "${model[@]}" --set data.path="$WORK/tiny" --set training.train_iters=$STEPS
        --set training.global_batch_size=8 --set training.micro_batch_size=1
        --set training.eval_interval=10 --set training.eval_iters=2 --set training.precision=${PRECISION:-fp32})

timeout 60 $LATTICE "${common[@]}" --set logging.metrics_file="$WORK/one.jsonl" --export "$WORK/one" >"$WORK/one.log" 2>&1 \
  || { cat "$WORK/one.log"; exit 1; }
# The seeded initialization as a Hugging Face file (for model.init_from).
timeout 60 $LATTICE export "${model[@]}" --output "$WORK/init" >"$WORK/init.log" 2>&1 \
  || { cat "$WORK/init.log"; exit 1; }
# The reference's own rounding sensitivity: one process again, its sums grouped differently (micro-
# batches of 2, 4 and 8 instead of 1). See compare_dp_runs.py --noise.
noise=()
for mb in 2 4 8; do
  timeout 60 $LATTICE "${common[@]}" --set training.micro_batch_size=$mb --set logging.metrics_file="$WORK/mb$mb.jsonl" \
    --export "$WORK/mb$mb" >"$WORK/mb$mb.log" 2>&1 || { cat "$WORK/mb$mb.log"; exit 1; }
  noise+=(--noise "$WORK/mb$mb.jsonl" "$WORK/mb$mb")
done
compare=(python3 tests/parallel/compare_dp_runs.py)
if [[ ${PRECISION:-fp32} == bf16 ]]; then
  timeout 60 $LATTICE "${common[@]}" --set training.precision=fp32 --set logging.metrics_file="$WORK/fp32.jsonl" \
    --export "$WORK/fp32" >"$WORK/fp32.log" 2>&1 || { cat "$WORK/fp32.log"; exit 1; }
  noise+=(--noise "$WORK/fp32.jsonl" "$WORK/fp32")
  compare+=(--bf16)
fi
runs=()
for name in "$@"; do
  [[ -n ${LAYOUTS[$name]:-} ]] || { echo "FAIL: unknown layout $name"; exit 1; }
  read -r np overrides <<<"${LAYOUTS[$name]}"
  trace=()
  [[ $name == pp2 || $name == pp2v2 ]] && trace=(--set logging.trace_file="$WORK/$name-trace.json")
  # shellcheck disable=SC2086  # the overrides are words
  if ! timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$np" $LATTICE "${common[@]}" $overrides "${trace[@]}" \
      --set logging.metrics_file="$WORK/$name.jsonl" --export "$WORK/$name" >"$WORK/$name.log" 2>&1 </dev/null; then
    echo "FAIL: $arch $name (mpirun -np $np):"
    tail -20 "$WORK/$name.log"
    exit 1
  fi
  grep -E "pipeline: measured bubble|data parallel: .* hidden" "$WORK/$name.log" | sed "s/^/$name: /" || true
  if [[ $overrides == *grad_reduce_dtype=bf16* ]]; then
    grep -q "data-parallel gradient reduction in bf16" "$WORK/$name.log" || fail "$name: the log does not state the bf16 reduction"
  fi
  python3 - "$WORK/$name.jsonl" "$overrides" <<'EOF'
import json, sys
path, overrides = sys.argv[1], sys.argv[2]
summary = [json.loads(l)["summary"] for l in open(path) if '"summary"' in l]
pp = "parallel.pipeline" in overrides
dp = "parallel.data" in overrides or "distributed_optimizer" in overrides
assert len(summary) == 1, f"{path}: one summary line expected, got {summary}"
s = summary[0]
if pp:
    assert 0 <= s["bubble_measured"] < 1 and 0 < s["bubble_theory"] < 1, s
else:
    assert "bubble_measured" not in s, f"{path}: no bubble expected without pipeline parallelism: {s}"
if dp:
    assert 0 <= s["dp_comm_hidden"] <= 1 and s["dp_comm_s"] >= s["dp_wait_s"] >= 0, s
else:
    assert "dp_comm_hidden" not in s, f"{path}: no dp numbers expected without data parallelism: {s}"
EOF
  if [[ ${#trace[@]} -gt 0 ]]; then
    # Every pp rank's trace: forward and backward of each (step, micro-batch, chunk), in its own pid.
    python3 - "$WORK/$name-trace" "$np" "$STEPS" "$overrides" <<'EOF'
import collections, json, sys
prefix, ranks, steps, overrides = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
v = 2 if "virtual_stages=2" in overrides else 1
for r in range(ranks):
    events = json.load(open(f"{prefix}.rank{r}.json"))["traceEvents"]
    assert all(e["pid"] == r for e in events), f"rank {r}: foreign pid"
    for kind in ("forward", "backward"):
        got = collections.Counter((e["args"]["step"], e["args"]["microbatch"], e["args"]["chunk"])
                                  for e in events if e["ph"] == "X" and e["name"] == kind and e["args"]["step"] > 0)
        want = {(s, m, c) for s in range(1, steps + 1) for m in range(8) for c in range(v)}
        assert set(got) == want and set(got.values()) == {1}, f"rank {r}: {kind} events {len(got)} != {len(want)}"
    names = {e["name"] for e in events}
    assert {"optimizer", "grad norm", "evaluation"} <= names, f"rank {r}: {sorted(names)}"
print(f"ok: {ranks} trace files, forward/backward per step, micro-batch and chunk")
EOF
  fi
  runs+=("$WORK/$name.jsonl" "$WORK/$name")
done
"${compare[@]}" $STEPS "$WORK/one.jsonl" "$WORK/one" "${noise[@]}" "${runs[@]}"
