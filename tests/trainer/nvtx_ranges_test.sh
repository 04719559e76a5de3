#!/usr/bin/env bash
# The NVTX ranges of a CUDA build (kernels/nvtx_range.h) as Nsight Systems receives them: an
# injection library (nvtx_recorder.cc) attached the way nsys attaches, through
# NVTX_INJECTION64_PATH, records every range; check_nvtx_ranges.py checks their nesting: steps,
# each micro-batch's forward and backward per chunk holding their ops, gradient norm, optimizer,
# evaluation, and on a pipeline layout the receive waits. A CPU run (NVTX marks host code; the
# CUDA build's own code paths), one process and PP2 x v2 interleaved under mpirun.
set -euo pipefail
source tests/parallel/train_test_env.sh
prepare_tiny_dataset
export NVTX_INJECTION64_PATH=$PWD/tests/trainer/libnvtx_recorder.so
common=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=3)

NVTX_RECORD_FILE=$WORK/one.nvtx timeout 120 $LATTICE train "${common[@]}" --set training.eval_interval=2 \
  --set training.eval_iters=1 >"$WORK/one.log" 2>&1 || { tail -20 "$WORK/one.log"; fail "one-process run"; }
[[ -s $WORK/one.nvtx ]] || fail "the injection library recorded nothing: NVTX did not load it"
python3 tests/trainer/check_nvtx_ranges.py "$WORK/one.nvtx" --steps 3 --microbatches 2 --eval-step 2 --eval-step 3

# One record per rank (%p: the process id).
timeout 180 mpirun -np 2 -x NVTX_INJECTION64_PATH -x NVTX_RECORD_FILE="$WORK/pp.%p.nvtx" $LATTICE train \
  "${common[@]}" --set model.num_layers=4 --set parallel.pipeline=2 --set parallel.virtual_stages=2 \
  --set parallel.schedule=interleaved --set training.micro_batch_size=1 >"$WORK/pp.log" 2>&1 ||
  { tail -20 "$WORK/pp.log"; fail "PP2 x v2 run"; }
records=("$WORK"/pp.*.nvtx)
[[ ${#records[@]} -eq 2 ]] || fail "expected one record per rank, got ${records[*]}"
for record in "${records[@]}"; do
  python3 tests/trainer/check_nvtx_ranges.py "$record" --steps 3 --microbatches 4 --chunks 2 --pipeline
done
echo "PASS"
