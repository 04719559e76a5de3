#!/usr/bin/env bash
# parallel.backend nccl through `lattice train` (issue 13): the tiny GPT-2, 20 steps with device cuda,
# every loss and grad norm bit for bit the host-staged MPI path's — one rank, and with two GPUs
# data=2, tensor=2, pipeline=2, and pipeline=2 interleaved (v=2; also with CUDA_DEVICE_MAX_CONNECTIONS=1,
# the second device model the pipeline's transfer lanes are proven in: parallel/p2p_order.h).
# Two-rank sums are exact in either order, so NCCL and MPI must agree to the bit. A hang ends in the
# watchdog's report naming the operation (parallel.timeout_s = $WATCHDOG_S, 60 unless set), before
# the run is killed 120 s later.
# usage: nccl_train_test.sh LATTICE_BINARY DATA_PREFIX WORK_DIR GPUS   (from the repository root)
# NCCL needs a GPU per rank: with GPUS < 2 the two-rank layouts are NOT RUN, and it says so.
# parallel.backend auto takes NCCL where every rank has a GPU and says so; two ranks made to share one
# GPU (CUDA_VISIBLE_DEVICES=0, or the emulator's one GPU) take MPI under auto and end with exit 2 under nccl.
# Prints "PASS <name>" or "FAIL <name>" per check and ends with "nccl_train_test: N passed, M failed".
set -uo pipefail
BIN=$1 DATA=$2 WORK=$3 GPUS=$4
WATCHDOG_S=${WATCHDOG_S:-60}
mkdir -p "$WORK"
MPIRUN=${MPIRUN:-mpirun}
passed=0 failed=0
result() {  # result NAME STATUS
  if [[ $2 -eq 0 ]]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}
train() {  # train NAME RANKS BACKEND [--set ...]; each rank runs under $RANK_WRAPPER when set
  local name=$1 np=$2 backend=$3
  shift 3
  timeout $((WATCHDOG_S + 120)) $MPIRUN --oversubscribe -np "$np" ${RANK_WRAPPER:-} "$BIN" train --config configs/test-tiny-gpt2.json --set device=cuda \
    --set data.path="$DATA" --set training.train_iters=20 --set training.eval_interval=0 \
    --set parallel.backend="$backend" --set parallel.timeout_s="$WATCHDOG_S" --set logging.metrics_file="$WORK/$name.jsonl" \
    "$@" >"$WORK/$name.log" 2>&1 ||
    { local rc=$?
      echo "  $name exited $rc: $( (grep -a -m2 -E '\[(error|critical)\]' "$WORK/$name.log" ||
        tail -3 "$WORK/$name.log") | tr -d '\0')"
      return $rc; }
}
same_steps() {  # same_steps A B: every step's loss and grad norm equal bit for bit
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" <<'PY'
import json, sys
a, b = ([(s["step"], s["loss"], s["grad_norm"]) for s in map(json.loads, open(p)) if "loss" in s] for p in sys.argv[1:])
print(f"  {len(a)} steps; first different: {next((x for x, y in zip(a, b) if x != y), None)}")
sys.exit(0 if a == b and len(a) == 20 else 1)
PY
}

train nccl-1 1 nccl && train mpi-1 1 mpi && same_steps nccl-1 mpi-1
result "one rank: parallel.backend nccl = mpi (every loss and grad norm)" $?
took() {  # took NAME TRANSPORT: the run's log says which transport parallel.backend auto chose
  grep -a -q "parallel.backend auto: .*$2" "$WORK/$1.log" ||
    { echo "  $1: no 'parallel.backend auto: ... $2' line in its log"; return 1; }
}
train auto-1 1 auto && took auto-1 "over NCCL" && same_steps auto-1 mpi-1
result "one rank: parallel.backend auto takes NCCL, = mpi (every loss and grad norm)" $?
# Two ranks on one GPU, whatever this machine has: the emulator's LATTICE_EMULATED_GPUS, a GPU's
# CUDA_VISIBLE_DEVICES (mpirun's ranks inherit both).
(export LATTICE_EMULATED_GPUS=1 CUDA_VISIBLE_DEVICES=0 && train shared-auto 2 auto --set parallel.data=2 &&
  train shared-mpi 2 mpi --set parallel.data=2) && took shared-auto "over MPI.*2 ranks share one GPU" &&
  same_steps shared-auto shared-mpi
result "2 ranks sharing 1 GPU, parallel.data=2: parallel.backend auto takes MPI and says why, = mpi" $?
(export LATTICE_EMULATED_GPUS=1 CUDA_VISIBLE_DEVICES=0 && train shared-nccl 2 nccl --set parallel.data=2)
st=$?
grep -a -q 'parallel.backend is "nccl" but 2 ranks share one GPU' "$WORK/shared-nccl.log"
named=$?
result "2 ranks sharing 1 GPU: parallel.backend nccl is exit 2 naming parallel.backend (exit $st)" \
  $((st == 2 && named == 0 ? 0 : 1))
if [[ $GPUS -ge 2 ]]; then
  for layout in "data=2" "tensor=2" "pipeline=2"; do
    name=${layout/=/}
    train "nccl-$name" 2 nccl --set parallel.$layout && train "mpi-$name" 2 mpi --set parallel.$layout &&
      same_steps "nccl-$name" "mpi-$name"
    result "2 GPUs, parallel.$layout: parallel.backend nccl = mpi (every loss and grad norm)" $?
  done
  train auto-data2 2 auto --set parallel.data=2 && took auto-data2 "over NCCL" && same_steps auto-data2 mpi-data2
  result "2 GPUs, parallel.data=2: parallel.backend auto takes NCCL, = mpi (every loss and grad norm)" $?
  # Each rank bound to its own GPU, which it sees as its only one (Slurm's --gpus-per-task=1): the
  # GPUs' UUIDs, not local rank mod visible GPUs, say that no two ranks share one.
  (RANK_WRAPPER=$(pwd)/tests/cuda/bind_gpu_per_rank.sh && train bound-data2 2 auto --set parallel.data=2) &&
    took bound-data2 "over NCCL" && same_steps bound-data2 mpi-data2 &&
    grep -a -q "local rank 1 of 2 uses visible GPU 0 of 1" "$WORK/bound-data2.log"
  result "2 ranks each bound to its own GPU (CUDA_VISIBLE_DEVICES per rank): auto takes NCCL, = mpi" $?
  # The interleaved schedule: the pipeline's transfer lanes carry both directions between the 2 ranks.
  v2=(--set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved
    --set model.num_layers=4 --set training.micro_batch_size=1)
  train nccl-pp2v2 2 nccl "${v2[@]}" && train mpi-pp2v2 2 mpi "${v2[@]}" && same_steps nccl-pp2v2 mpi-pp2v2
  result "2 GPUs, pipeline=2 interleaved v=2: parallel.backend nccl = mpi (every loss and grad norm)" $?
  # mpirun's local ranks inherit the variable.
  (export CUDA_DEVICE_MAX_CONNECTIONS=1 && train nccl-pp2v2-1queue 2 nccl "${v2[@]}") &&
    same_steps nccl-pp2v2-1queue mpi-pp2v2
  result "2 GPUs, pipeline=2 interleaved v=2, CUDA_DEVICE_MAX_CONNECTIONS=1: nccl = mpi" $?
  # The distributed optimizer: each bucket reduce-scattered in place in the gradients, the bf16
  # parameters all-gathered within themselves, overlapped with the next forward.
  dopt=(--set parallel.data=2 --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true
    --set training.precision=bf16)
  train nccl-dp2do 2 nccl "${dopt[@]}" && train mpi-dp2do 2 mpi "${dopt[@]}" && same_steps nccl-dp2do mpi-dp2do
  result "2 GPUs, data=2, distributed optimizer (bf16, in-place buckets, overlapped gathers): nccl = mpi" $?
else
  echo "NOT RUN: the 2-rank NCCL layouts (data=2, tensor=2, pipeline=2, pipeline=2 interleaved, and that with" \
    "CUDA_DEVICE_MAX_CONNECTIONS=1, data=2 with the distributed optimizer, against the MPI path; auto's choice" \
    "of NCCL for data=2): $GPUS GPU visible," \
    "and NCCL needs a GPU per rank"
fi
echo "nccl_train_test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
