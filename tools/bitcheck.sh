#!/usr/bin/env bash
# Refactors must keep CPU training bit-identical: trains the tiny GPT-2 and Llama for 12 steps
# (validation every 4) in seven layouts and prints every step's loss, grad norm, LR and validation
# loss as exact doubles. Save the output of the binary before a change, diff it with the one after:
#   tools/bitcheck.sh /tmp/lattice-before > /tmp/before.txt
#   tools/bitcheck.sh bazel-bin/trainer/lattice | diff /tmp/before.txt - && echo BIT-IDENTICAL
# (Compare on one machine: another CPU's OpenBLAS kernels round differently.)
set -euo pipefail
BIN=$(realpath "$1")
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DATA=runs/bitcheck/tiny
mkdir -p runs/bitcheck
[[ -f $DATA.idx ]] || "$BIN" data prepare --input /usr/share/games/fortunes/fortunes /usr/share/games/fortunes/literature \
  /usr/share/games/fortunes/science --output-prefix "$DATA" --text-document-separator percent-line >/dev/null 2>&1
run() {
  local name=$1 np=$2 cfg=$3
  shift 3
  local cmd=("$BIN" train --config "configs/$cfg" --set data.path=$DATA --set training.train_iters=12
    --set training.eval_interval=4 --set training.eval_iters=2 --set logging.metrics_file="$OUT/$name.jsonl" "$@")
  if [[ $np -gt 1 ]]; then mpirun --oversubscribe -np "$np" "${cmd[@]}" >"$OUT/$name.log" 2>&1; else "${cmd[@]}" >"$OUT/$name.log" 2>&1; fi ||
    { echo "$name FAILED"; tail -5 "$OUT/$name.log"; return 0; }
  python3 -c '
import json, sys
for line in open(sys.argv[2]):
    r = json.loads(line)
    if "loss" in r: print(sys.argv[1], r["step"], repr(r["loss"]), repr(r["grad_norm"]), repr(r["lr"]))
    if "val_loss" in r: print(sys.argv[1], r["step"], "val", repr(r["val_loss"]))
' "$name" "$OUT/$name.jsonl"
}
run gpt2_one 1 test-tiny-gpt2.json
run llama_one 1 test-tiny-llama.json
run gpt2_tp2pp2 4 test-tiny-gpt2.json --set parallel.tensor=2 --set parallel.pipeline=2
run gpt2_dp2do 2 test-tiny-gpt2.json --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true
run gpt2_pp2v2dp2 4 test-tiny-gpt2.json --set model.num_layers=4 --set parallel.pipeline=2 --set parallel.virtual_stages=2 \
  --set parallel.schedule=interleaved --set training.micro_batch_size=1 --set parallel.distributed_optimizer=true
run llama_tp2sp 2 test-tiny-llama.json --set parallel.tensor=2 --set parallel.sequence_parallel=true
run llama_dp2 2 test-tiny-llama.json --set parallel.data=2 --set training.global_batch_size=8
