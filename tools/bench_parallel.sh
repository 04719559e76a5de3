#!/usr/bin/env bash
# Parallel training figures on 2 ranks (one per core): PP2 with 1f1b and with interleaved 1F1B —
# the measured pipeline bubble next to the theoretical one — and DP2 with and without
# overlap_grad_reduce — step time and the share of gradient communication hidden behind compute.
# Every number is what `lattice train` itself prints and writes to its metrics file.
# Model: GPT-2 style, 8 layers, hidden 256, seq 128, byte vocabulary; global batch 32 of micro-batch
# 4 (PP2: 8 micro-batches; DP2: 4 per rank), 1 MB gradient buckets (25 of them).
# Usage: tools/bench_parallel.sh [STEPS=12]; WORK (default runs/bench_parallel).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-12}
WORK=${WORK:-runs/bench_parallel}
LATTICE=${LATTICE:-bazel-bin/trainer/lattice}
TEXT=/usr/share/games/fortunes
mkdir -p "$WORK"
[[ -x $LATTICE ]] || tools/build.sh
[[ -d $TEXT ]] || { echo "$TEXT missing: run tools/install_deps.sh"; exit 2; }
[[ -f $WORK/text.bin ]] || "$LATTICE" data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" \
  --output-prefix "$WORK/text" --text-document-separator percent-line >/dev/null 2>&1
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

common=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/text" --set training.train_iters="$STEPS"
        --set model.num_layers=8 --set model.hidden_size=256 --set model.num_attention_heads=8
        --set model.seq_length=128 --set training.micro_batch_size=4 --set training.global_batch_size=32
        --set parallel.bucket_size_mb=1 --set logging.log_interval=1000)
run() {  # name, then overrides
  local name=$1
  shift
  rm -f "$WORK/$name.jsonl"
  mpirun --oversubscribe -np 2 "$LATTICE" "${common[@]}" "$@" --set logging.metrics_file="$WORK/$name.jsonl" \
    >"$WORK/$name.log" 2>&1 </dev/null || { tail -20 "$WORK/$name.log"; exit 1; }
}
run pp2_1f1b --set parallel.pipeline=2
run pp2_interleaved --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved
run dp2_overlap --set parallel.overlap_grad_reduce=true
run dp2_no_overlap --set parallel.overlap_grad_reduce=false

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def read(name):
    rows = [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
    steps = [r for r in rows if "loss" in r][1:]  # the first step warms up
    summary = next(r["summary"] for r in rows if "summary" in r)
    return steps, summary
print(f"{'run':<18}{'step ms':>9}{'tokens/s':>10}{'bubble measured':>17}{'theory':>8}{'dp comm hidden':>16}")
for name in ("pp2_1f1b", "pp2_interleaved", "dp2_overlap", "dp2_no_overlap"):
    steps, s = read(name)
    ms = sum(r["step_ms"] for r in steps) / len(steps)
    tps = sum(r["tokens_per_s"] for r in steps) / len(steps)
    bubble = f"{100 * s['bubble_measured']:.1f}%" if "bubble_measured" in s else "-"
    theory = f"{100 * s['bubble_theory']:.1f}%" if "bubble_theory" in s else "-"
    hidden = f"{100 * s['dp_comm_hidden']:.1f}%" if "dp_comm_hidden" in s else "-"
    print(f"{name:<18}{ms:>9.1f}{tps:>10.0f}{bubble:>17}{theory:>8}{hidden:>16}")
PY
