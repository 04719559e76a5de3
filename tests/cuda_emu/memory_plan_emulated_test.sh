#!/usr/bin/env bash
# The memory plan on `device: cuda` (trainer/memory_plan.cc) against the CUDA backend's allocations,
# on the CPU emulator: the pool's high mark (every cudaMallocAsync of the backend's own code: the
# model's tensors, the kernels' scratch, cuBLASLt's kept workspace) must be within 1% of the
# predicted tensors. Sequences of 512 make f32 attention's [T, T] score scratch 8 MiB of the tiny
# model's ~47 MiB, and cuBLASLt's 32 MiB is most of the rest, so leaving either out of the plan fails.
# In bf16 the plan counts cuDNN's SDPA workspace as the device sizes it at start (the emulator's
# stand-in for cuDNN sizes and holds it as cuDNN before 9.25 does on Hopper: 4 MiB here), and the run
# allocates it before step 1; where cuDNN refuses, the f32 kernels' scratch and staging instead.
# Also `lattice train`'s check of the plan against
# the GPU's memory, counting the ranks that share a GPU: exit 2 before anything is allocated (every
# rank of the job), or a warning with --ignore-memory-check.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
fail() { echo "FAIL: $*"; exit 1; }

train_tiny() {  # train_tiny NAME RANKS SECONDS [--set ...]: the tiny GPT-2 at seq 512 on the emulated GPU, log in $WORK/NAME.log
  local name=$1 np=$2 seconds=$3
  shift 3
  local cmd=($LATTICE train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set device=cuda
    --set model.seq_length=512 "$@")
  [[ $np -gt 1 ]] && cmd=($MPIRUN --oversubscribe -np "$np" "${cmd[@]}")
  timeout "$seconds" "${cmd[@]}" >"$WORK/$name.log" 2>&1 </dev/null
}

check() {  # check NAME RANKS [--set ...]
  local name=$1 np=$2
  shift 2
  train_tiny "$name" "$np" 300 --set training.train_iters=2 --set logging.metrics_file="$WORK/$name.jsonl" "$@" ||
    { tail -20 "$WORK/$name.log"; fail "$name: the run failed"; }
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

# The memory check against the GPU's memory (here LATTICE_EMULATED_GPU_MEMORY_MIB), before anything
# is allocated: the f32 run's 47.9 MiB do not fit in 40 MiB, nor two ranks sharing the GPU in 80.
refused() {  # refused NAME EXPECTED RANKS [--set ...]: exit 2 and the expected message
  local name=$1 expected=$2 np=$3
  shift 3
  local st=0
  train_tiny "$name" "$np" 120 "$@" || st=$?
  [[ $st -eq 2 ]] && grep -a -q -- "$expected" "$WORK/$name.log" ||
    { tail -3 "$WORK/$name.log"; fail "$name: exit $st, expected 2 and \"$expected\""; }
  echo "$name: exit 2, $(grep -a -m1 -o "a rank needs.*GPU)" "$WORK/$name.log" | sed 's/ (its largest.*buffers)//')"
}
export LATTICE_EMULATED_GPU_MEMORY_MIB=40
refused refused_40mib "a rank needs about 47.9 MiB .*, but this GPU has 40.0 MiB (CPU emulator of a GPU)" 1
LATTICE_EMULATED_GPU_MEMORY_MIB=80 refused refused_shared_80mib \
  "× 2 ranks sharing this GPU = 95.8 MiB, but this GPU has 80.0 MiB" 2 --set parallel.data=2
# Three ranks on two GPUs: the two sharing GPU 0 do not fit in its 80 MiB, the third fits alone on
# GPU 1; the ranks agree, so that one also ends with exit 2 instead of waiting in the job's next call,
# and the refusal (rank 0's) is printed once.
LATTICE_EMULATED_GPUS=2 LATTICE_EMULATED_GPU_MEMORY_MIB=80 refused refused_3_ranks_2_gpus \
  "× 2 ranks sharing this GPU = 95.8 MiB, but this GPU has 80.0 MiB" 3 --set parallel.data=3 \
  --set training.global_batch_size=6
[[ $(grep -a -c "\[error\]" "$WORK/refused_3_ranks_2_gpus.log") -eq 1 ]] ||
  fail "refused_3_ranks_2_gpus: the refusal is not printed once: $(grep -a "\[error\]" "$WORK/refused_3_ranks_2_gpus.log")"

# With 300 MiB in use beyond the pool (the emulator's stand-in for the CUDA context, the libraries
# and NCCL), the memory line and the summary report it, apart from the plan's figures.
LATTICE_EMULATED_GPU_OUTSIDE_POOL_MIB=300 check f32 1 --ignore-memory-check
grep -a -q "but this GPU has 40.0 MiB.*(starting anyway: --ignore-memory-check)" "$WORK/f32.log" ||
  fail "f32 with --ignore-memory-check: no warning"
grep -a -q "; in use beyond the pool at the end, not in the plan: 0.293 GiB (the CUDA context" "$WORK/f32.log" ||
  fail "f32: the memory line does not report the 300 MiB beyond the pool"
grep -a '"summary"' "$WORK/f32.jsonl" | grep -q "\"device_outside_pool_bytes\":$((300 << 20))[.,}]" ||
  fail "f32: the summary's device_outside_pool_bytes is not 300 MiB"
unset LATTICE_EMULATED_GPU_MEMORY_MIB
check bf16 1 --set training.precision=bf16
grep -a -q "cuDNN SDPA workspace: 4.0 MiB, allocated before step 1" "$WORK/bf16.log" ||
  fail "bf16: no 4.0 MiB cuDNN workspace allocated before step 1"
grep -a -q "workspaces (cuDNN's: estimated)" "$WORK/bf16.log" && fail "bf16: the plan estimated what the GPU sized"
# training.deterministic_attention false: cuDNN's plain backward, whose workspace (none, as emulated)
# the plan counts instead.
check bf16_nondeterministic 1 --set training.precision=bf16 --set training.deterministic_attention=false
grep -a -q "cuDNN SDPA workspace: 0.0 MiB, allocated before step 1 (forward 0.0 MiB, backward 0.0 MiB" \
  "$WORK/bf16_nondeterministic.log" || fail "bf16_nondeterministic: not cuDNN's plain backward's workspace"
grep -a -q "deterministic backward 4.0 MiB" "$WORK/bf16.log" || fail "bf16: not the deterministic backward's workspace"
LATTICE_EMU_CUDNN_REFUSES=all check bf16_refused 1 --set training.precision=bf16
LATTICE_EMU_CUDNN_REFUSES=backward check bf16_refused_backward 1 --set training.precision=bf16
check tp2_f32 2 --set parallel.tensor=2
echo "PASS: the pool's high mark within 1% of the memory plan in f32, bf16 (cuDNN's deterministic or plain" \
  "backward, or cuDNN refusing either direction) and TP2; the memory beyond the pool reported; a run larger than" \
  "the GPU's memory refused before it allocates, alone and with 2 ranks sharing the GPU"
