#!/usr/bin/env bash
# The memory plan on `device: cuda` (trainer/memory_plan.cc) against the CUDA backend's allocations,
# on the CPU emulator: the pool's high mark (every cudaMallocAsync of the backend's own code: the
# model's tensors, the kernels' scratch, cuBLASLt's kept workspace) must be within 1% of the
# predicted tensors. Sequences of 512 make f32 attention's [T, T] score scratch 8 MiB of the tiny
# model's ~47 MiB, and cuBLASLt's 32 MiB is most of the rest, so leaving either out of the plan fails.
# In bf16 the plan leaves cuDNN's SDPA workspace out (cuDNN sizes it on the GPU); the emulator's
# stand-in for cuDNN allocates 16 KiB in its place.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
fail() { echo "FAIL: $*"; exit 1; }

check() {  # check NAME RANKS [--set ...]
  local name=$1 np=$2
  shift 2
  local cmd=($LATTICE train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set device=cuda
    --set model.seq_length=512 --set training.train_iters=2 --set logging.metrics_file="$WORK/$name.jsonl" "$@")
  [[ $np -gt 1 ]] && cmd=($MPIRUN --oversubscribe -np "$np" "${cmd[@]}")
  timeout 300 "${cmd[@]}" >"$WORK/$name.log" 2>&1 </dev/null || { tail -20 "$WORK/$name.log"; fail "$name: the run failed"; }
  grep -a -m1 -E "cuBLASLt" "$WORK/$name.log" | sed 's/^.*\] /  /'
  python3 - "$name" "$WORK/$name.jsonl" <<'PY' || fail "$name: the pool's high mark is not within 1% of the plan"
import json, sys
name, path = sys.argv[1], sys.argv[2]
s = [json.loads(l) for l in open(path) if '"summary"' in l][-1]["summary"]
planned, pool = s["predicted_storage_bytes"], s["peak_device_bytes"]
off = 100 * (pool / planned - 1)
print(f"{name:<10} predicted {planned / 2**20:6.2f} MiB, pool high mark {pool / 2**20:6.2f} MiB ({off:+.2f}%)")
sys.exit(0 if abs(off) <= 1 else 1)
PY
}

check f32 1
check bf16 1 --set training.precision=bf16
check tp2_f32 2 --set parallel.tensor=2
echo "PASS: the pool's high mark within 1% of the memory plan in f32, bf16 and TP2"
